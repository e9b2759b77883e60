"""Django settings for searchlab.

Every environment variable the web app reads is read here, once, through the strict helpers of
:mod:`webapp.settings_env`: a value that cannot be parsed stops start-up with an ``ImproperlyConfigured`` that names
the variable. docker/.env.example lists them all.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from webapp.common.exposure import bind_addresses, exposure_problem, stored_secret_key
from webapp.settings_env import env_bool, env_choice, env_int, env_list, env_path, env_str, env_url

BASE_DIR = Path(__file__).resolve().parent.parent

# --- Environment -------------------------------------------------------------------------------------------------

SEARCHLAB_ENV = env_choice("SEARCHLAB_ENV", "development", ("development", "production"))
PRODUCTION = SEARCHLAB_ENV == "production"
DEBUG = env_bool("DEBUG", not PRODUCTION)

ALLOWED_HOSTS = env_list(
    "ALLOWED_HOSTS", [] if PRODUCTION else ["localhost", "127.0.0.1", "[::1]", "testserver"]
)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

VAR_DIR = env_path("SEARCHLAB_VAR_DIR", BASE_DIR / "var")

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY must be set when SEARCHLAB_ENV=production")
    # Development and the demo: a random key made once and kept in var/secret_key (never a key in the source).
    SECRET_KEY = stored_secret_key(VAR_DIR / "secret_key")
# A deployment, or a process bound beyond loopback (runserver/demo ADDR, gunicorn --bind, DEMO_ADDR or
# SEARCHLAB_BIND), refuses to start with DEBUG or the old development key (webapp.common.exposure).
_exposure = exposure_problem(
    production=PRODUCTION,
    debug=DEBUG,
    secret_key=SECRET_KEY,
    addresses=bind_addresses(sys.argv, os.environ),
)
if _exposure:
    raise ImproperlyConfigured(_exposure)

# Third-party data shared with developers and CI (../shared/data/wiki_multihop); never copied into the repository.
SHARED_DIR = env_path("SEARCHLAB_SHARED_DIR", BASE_DIR.parent / "shared")

# --- Applications ------------------------------------------------------------------------------------------------

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "webapp.accounts",
    "webapp.corpora",
    "webapp.datasets",
    "webapp.runs",
    "webapp.trajectories",
    "webapp.audits",
    "webapp.imports",
    "webapp.demo",
    "webapp.api",
    "webapp.training",
    "webapp.evaluation",
    "webapp.experiments",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "webapp.common.limits.RequestLimitsMiddleware",  # body size and JSON depth on /api/ and /retrieve, as JSON
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "webapp.accounts.middleware.LoginRequiredExceptApiMiddleware",
    "webapp.accounts.middleware.AnnotatorScopeMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

if PRODUCTION:
    # Static files (CSS, htmx, the API docs' UI) collected into STATIC_ROOT and served by gunicorn itself.
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "webapp.urls"
WSGI_APPLICATION = "webapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "webapp.accounts.context_processors.role",
            ],
        },
    },
]

# --- Database ----------------------------------------------------------------------------------------------------

DATABASE_URL = env_url(
    "DATABASE_URL",
    f"sqlite:///{VAR_DIR / 'searchlab.sqlite3'}",
    ("sqlite", "postgres", "postgresql", "pgsql"),
)
DB_CONN_MAX_AGE = env_int("DB_CONN_MAX_AGE", 60, minimum=0)
try:
    _database = dj_database_url.parse(DATABASE_URL, conn_max_age=DB_CONN_MAX_AGE, conn_health_checks=True)
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
if _database["ENGINE"] == "django.db.backends.sqlite3":
    if _database["NAME"] != ":memory:":
        Path(_database["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # A file, not the in-memory default: the Celery worker a test starts must open the same test database.
    _database["TEST"] = {"NAME": str(VAR_DIR / "test-searchlab.sqlite3")}
    _database["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
DATABASES = {"default": _database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_url("REDIS_URL", "", ("redis", "rediss", "unix"))
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- People ------------------------------------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
# TLS is terminated by a proxy in front of gunicorn; these make Django insist on it.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Internationalisation, static and uploaded files ------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env_path("STATIC_ROOT", VAR_DIR / "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
UPLOAD_DIR = env_path("UPLOAD_DIR", VAR_DIR / "uploads")
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 20 * 1024 * 1024, minimum=1024)
# webapp.common.limits: a JSON body nested deeper than this is a 400 on these path prefixes (and in DRF's parser).
REQUEST_JSON_MAX_DEPTH = env_int("REQUEST_JSON_MAX_DEPTH", 64, minimum=8, maximum=10_000)
REQUEST_LIMIT_PATHS = ("/api/", "/retrieve")
# An uploaded file (Imports page) is refused above this size; an experiment bundle may unpack to at most
# UPLOAD_MAX_UNPACKED_BYTES (and UPLOAD_MAX_UNPACKED_FILES members). Uploads older than UPLOAD_RETENTION_DAYS whose
# job has ended are deleted (a Celery beat task, hourly); a failed import's files are deleted at once.
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 2 * 1024**3, minimum=1024)
UPLOAD_MAX_UNPACKED_BYTES = env_int("UPLOAD_MAX_UNPACKED_BYTES", 8 * 1024**3, minimum=1024)
UPLOAD_MAX_UNPACKED_FILES = env_int("UPLOAD_MAX_UNPACKED_FILES", 100_000, minimum=1)
UPLOAD_RETENTION_DAYS = env_int("UPLOAD_RETENTION_DAYS", 7, minimum=0)

# --- Imports and scoring -----------------------------------------------------------------------------------------

IMPORT_BATCH_SIZE = env_int("IMPORT_BATCH_SIZE", 2000, minimum=1, maximum=100_000)
# POST /api/v1/score scores at most this many trajectories in the request; larger batches become a job to poll.
SCORE_SYNC_MAX = env_int("SCORE_SYNC_MAX", 32, minimum=0)
SCORE_MAX_TRAJECTORIES = env_int("SCORE_MAX_TRAJECTORIES", 10_000, minimum=1)

# --- REST API ----------------------------------------------------------------------------------------------------

API_PAGE_SIZE = env_int("API_PAGE_SIZE", 100, minimum=1, maximum=500)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "webapp.accounts.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["webapp.accounts.permissions.IsResearcher"],
    "DEFAULT_PAGINATION_CLASS": "webapp.common.pagination.PageNumberPagination",
    "PAGE_SIZE": API_PAGE_SIZE,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # DRF's parsers, with JSON's depth and digit limits answered as 400 (webapp.common.limits)
    "DEFAULT_PARSER_CLASSES": [
        "webapp.common.limits.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "webapp.common.renderers.OrjsonRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "searchlab API",
    "DESCRIPTION": "Runs, trajectories, step-level process rewards, and scoring of raw trajectories.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["webapp.accounts.permissions.IsResearcher"],
    # The UIs are served from drf-spectacular-sidecar's static files: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "MethodEnum": "webapp.runs.models.Method",
        "TrajectoryFormatEnum": "webapp.trajectories.models.FORMAT_CHOICES",
        "RunKindEnum": "webapp.runs.models.Run.Kind",
        "RunStatusEnum": "webapp.runs.models.Run.Status",
        "StepKindEnum": "webapp.trajectories.models.Step.Kind",
        "ScoreJobStatusEnum": "webapp.api.models.ScoreJob.Status",
    },
}

# --- Celery ------------------------------------------------------------------------------------------------------

CELERY_BROKER_URL = env_url("CELERY_BROKER_URL", "", ("redis", "rediss", "amqp", "filesystem", "memory"))
CELERY_FS_DIR = env_path("CELERY_FS_DIR", VAR_DIR / "celery")
if not CELERY_BROKER_URL:
    # The embedded default: kombu's filesystem transport, still consumed by a real worker process.
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_FS_DIR / "queue"),
        "data_folder_out": str(CELERY_FS_DIR / "queue"),
        "control_folder": str(CELERY_FS_DIR / "control"),
        "store_processed": False,
    }
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
CELERY_TASK_IGNORE_RESULT = True  # results live in the database (job rows), never in a result backend
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_QUEUES = [Queue(name) for name in ("default", "judge", "retrieval", "train")]
CELERY_TASK_ROUTES = {
    "webapp.*.tasks.judge_*": {"queue": "judge"},
    "webapp.corpora.tasks.index_*": {"queue": "retrieval"},
    "webapp.runs.tasks.run_*": {"queue": "train"},
    "webapp.training.tasks.training_*": {"queue": "train"},
    "webapp.experiments.tasks.experiment_*": {"queue": "train"},  # supervises training subprocesses
}
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

# --- Training runs -----------------------------------------------------------------------------------------------

# Each train run gets <TRAINING_RUNS_DIR>/<run id>/ (config.json, trainer.log, the trainer's output/).
TRAINING_RUNS_DIR = env_path("TRAINING_RUNS_DIR", VAR_DIR / "runs")
# "python": `python -m trainer.train CONFIG` (CPU, one GPU); "accelerate": `accelerate launch … -m trainer.train`.
TRAINING_LAUNCHER = env_choice("TRAINING_LAUNCHER", "python", ("python", "accelerate"))
TRAINING_ACCELERATE_ARGS = env_list("TRAINING_ACCELERATE_ARGS", [])
# After a stop request the trainer gets SIGINT, then this long to exit before SIGKILL.
TRAINING_STOP_GRACE_SECONDS = env_int("TRAINING_STOP_GRACE_SECONDS", 30, minimum=0)
# A running run whose heartbeat is older than this and whose supervisor is gone is marked crashed.
TRAINING_HEARTBEAT_TIMEOUT_SECONDS = env_int("TRAINING_HEARTBEAT_TIMEOUT_SECONDS", 120, minimum=5)
# Where trainers that report over HTTP (trainer.report_client: Ray jobs, followers) reach searchlab's ingest API.
TRAINING_INGEST_URL = env_str("TRAINING_INGEST_URL", "http://127.0.0.1:8000")
# A trainer reporting over HTTP spools through outages: its run is "quiet" this long before it is marked crashed.
TRAINING_REPORT_QUIET_LIMIT_SECONDS = env_int("TRAINING_REPORT_QUIET_LIMIT_SECONDS", 6 * 3600, minimum=60)
# Ingest tokens expire this long after they are issued (revoking a run's tokens ends them at once).
INGEST_TOKEN_MAX_AGE_SECONDS = env_int("INGEST_TOKEN_MAX_AGE_SECONDS", 30 * 24 * 3600, minimum=60)
# A run keeps the last this many bytes of the log tail its trainer reports.
INGEST_LOG_TAIL_BYTES = env_int("INGEST_LOG_TAIL_BYTES", 64 * 1024, minimum=1024)
# A Ray cluster's Jobs API (its dashboard, e.g. http://ray-head:8265): the new-run form then offers the "ray"
# executor (webapp.training.executors, docs/scale.md). Empty: local runs only.
RAY_ADDRESS = env_str("RAY_ADDRESS", "")
# The run's folder on the cluster's nodes (default TRAINING_RUNS_DIR), the nodes' Python, and the job's extras.
RAY_RUNS_DIR = env_str("RAY_RUNS_DIR", "")
RAY_PYTHON = env_str("RAY_PYTHON", "")
RAY_ACCELERATE_ARGS = env_list("RAY_ACCELERATE_ARGS", [])  # comma-separated, e.g. --num_processes,8
RAY_ENTRYPOINT_NUM_GPUS = env_int("RAY_ENTRYPOINT_NUM_GPUS", 0, minimum=0)
# A retriever per node (e.g. http://127.0.0.1:8001/retrieve): a Ray job searches there instead of the run's index.
RAY_RETRIEVE_URL = env_str("RAY_RETRIEVE_URL", "")
RAY_RUNTIME_ENV: dict[str, object] = {}  # merged into each job's runtime_env (working_dir, pip, env_vars, …)
RAY_POLL_SECONDS = float(env_str("RAY_POLL_SECONDS", "2"))
# An index build beats with its progress writes; one long FAISS step (HNSW insertion) can be minutes of silence.
INDEX_HEARTBEAT_TIMEOUT_SECONDS = env_int("INDEX_HEARTBEAT_TIMEOUT_SECONDS", 900, minimum=30)
# Celery beat (`celery -A webapp beat`, or `worker -B`; `manage.py demo` starts one): the periodic checks that
# notice a dead trainer or index build even when no page is open.
CELERY_BEAT_SCHEDULE = {
    "check-crashed-runs": {"task": "webapp.training.tasks.check_crashed_runs_task", "schedule": 60.0},
    "check-crashed-indexes": {"task": "webapp.corpora.tasks.check_crashed_indexes_task", "schedule": 60.0},
    "clean-old-uploads": {"task": "webapp.imports.tasks.uploads_clean_task", "schedule": 3600.0},
}

# --- Evaluation runs ---------------------------------------------------------------------------------------------

# The policy model the new-evaluation form proposes: the CPU default, a local transformers folder.
EVAL_DEFAULT_MODEL = env_str("EVAL_DEFAULT_MODEL", str(VAR_DIR / "models" / "SmolLM2-135M-Instruct"))
# Questions per evaluate() call: each batch's trajectories and the report so far are stored, then the next starts.
EVAL_BATCH_SIZE = env_int("EVAL_BATCH_SIZE", 32, minimum=1, maximum=4096)

# --- Retrieval indexes and POST /retrieve ------------------------------------------------------------------------

# Each index is built into <RETRIEVAL_INDEX_DIR>/<index id>/; passage embeddings are cached per encoder and corpus.
RETRIEVAL_INDEX_DIR = env_path("RETRIEVAL_INDEX_DIR", VAR_DIR / "retrieval" / "indexes")
RETRIEVAL_EMBEDDINGS_DIR = env_path("RETRIEVAL_EMBEDDINGS_DIR", VAR_DIR / "retrieval" / "embeddings")
# Encoders the build form offers besides the bundled MiniLM and the model-free hashing encoder (local paths or
# hub names already in the local Hugging Face cache: nothing is downloaded).
RETRIEVAL_ENCODERS = env_list("RETRIEVAL_ENCODERS", [])
# FAISS threads per searching process (one is fastest on a 2-core box); RETRIEVAL_USE_GPU needs faiss-gpu.
RETRIEVAL_FAISS_THREADS = env_int("RETRIEVAL_FAISS_THREADS", 1, minimum=1, maximum=256)
RETRIEVAL_USE_GPU = env_bool("RETRIEVAL_USE_GPU", False)
# The index POST /retrieve serves (an Index id); 0 serves the most recently built ready index.
RETRIEVE_INDEX = env_int("RETRIEVE_INDEX", 0, minimum=0)
# Shared secret for POST /retrieve (sent as "Authorization: Bearer <token>"). Unset: only direct loopback
# connections are answered, since Search-R1's training scripts send no credentials.
RETRIEVE_TOKEN = env_str("RETRIEVE_TOKEN")

# --- Logging -----------------------------------------------------------------------------------------------------

LOG_LEVEL = env_choice("LOG_LEVEL", "info", ("debug", "info", "warning", "error")).upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
