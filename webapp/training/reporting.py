"""Runs whose trainer reports over HTTP (a Ray job's report wrapper, an external trainer, a veRL follower): when
they are quiet rather than crashed, how a Stop reaches them, and revoking their ingest tokens.

Such a trainer spools what it cannot send (trainer.report_client) and replays it when searchlab answers again, so
minutes of silence are an outage, not a death: the run is shown as *quiet for …* and marked crashed only after
``TRAINING_REPORT_QUIET_LIMIT_SECONDS`` (default 6 h, well beyond the spool's replay); a final status the trainer
sends later still wins over that crash.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from trainer.placement import CONFIG_KEY, Placement
from webapp.runs.models import Run

logger = logging.getLogger(__name__)

QUIET_ERROR_PREFIX = "quiet for "  # the error of a reported run marked crashed after the quiet limit
DEFAULT_QUIET_LIMIT_SECONDS = 6 * 3600
DEFAULT_TOKEN_MAX_AGE_SECONDS = 30 * 24 * 3600
DEFAULT_LOG_TAIL_BYTES = 64 * 1024


def quiet_limit_seconds() -> int:
    """How long a reported run may be silent before it is marked crashed."""
    return int(getattr(settings, "TRAINING_REPORT_QUIET_LIMIT_SECONDS", DEFAULT_QUIET_LIMIT_SECONDS))


def quiet_after_seconds() -> int:
    """Silence shorter than this is not worth a word (the supervisor's heartbeat timeout)."""
    return int(getattr(settings, "TRAINING_HEARTBEAT_TIMEOUT_SECONDS", 120))


def token_max_age_seconds() -> int:
    return int(getattr(settings, "INGEST_TOKEN_MAX_AGE_SECONDS", DEFAULT_TOKEN_MAX_AGE_SECONDS))


def log_tail_bytes() -> int:
    return int(getattr(settings, "INGEST_LOG_TAIL_BYTES", DEFAULT_LOG_TAIL_BYTES))


def is_reported(run: Run) -> bool:
    """The run's trainer reports over HTTP: an external run, or a Ray job (its wrapper posts to ingest)."""
    if (run.config or {}).get(CONFIG_KEY) == Placement.EXTERNAL:
        return True
    process = getattr(run, "training_process", None) if _has_process(run) else None
    return process is not None and process.executor == Placement.RAY


def _has_process(run: Run) -> bool:
    try:
        run.training_process  # noqa: B018  # a reverse one-to-one raises when absent
    except Exception:
        return False
    return True


def ended_by_quiet(run: Run) -> bool:
    """Marked crashed for its silence: its trainer may still come back with rows and a final status."""
    return run.status == Run.Status.CRASHED and (run.error or "").startswith(QUIET_ERROR_PREFIX)


def accepts_reports(run: Run) -> bool:
    """Writes are taken while the run is active, and after a crash guessed from silence alone."""
    return run.is_active or ended_by_quiet(run)


def quiet_seconds(run: Run, *, now: dt.datetime | None = None) -> int | None:
    """Seconds since a running reported run last reported, when that is longer than the heartbeat timeout."""
    if run.status != Run.Status.RUNNING or run.heartbeat_at is None or not is_reported(run):
        return None
    seconds = int(((now or timezone.now()) - run.heartbeat_at).total_seconds())
    return seconds if seconds >= quiet_after_seconds() else None


def duration(seconds: float) -> str:
    """``3 min``, ``2 h 5 min``, ``40 s``: how long, as the run page says it."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def quiet_error(seconds: float) -> str:
    return (
        f"{QUIET_ERROR_PREFIX}{duration(seconds)}, beyond the limit of {duration(quiet_limit_seconds())} "
        "(TRAINING_REPORT_QUIET_LIMIT_SECONDS); a final status its trainer sends later still counts"
    )


def tokens_revoke(*, run_id: int) -> int:
    """Revoke every ingest token issued for the run so far; the new generation (new tokens carry it)."""
    with transaction.atomic():
        Run.objects.filter(pk=run_id).update(ingest_generation=F("ingest_generation") + 1)
        generation = Run.objects.values_list("ingest_generation", flat=True).get(pk=run_id)
    logger.info("run %s: ingest tokens revoked (generation %s)", run_id, generation)
    return int(generation)


def stop_reported(run: Run) -> None:
    """Record a Stop for a reported run: its trainer reads ``stop: true`` in its next ingest answer. A Ray job whose
    supervisor no longer watches it is stopped through Ray here (a watching supervisor stops it itself)."""
    if run.stop_requested_at is None:
        Run.objects.filter(pk=run.pk, stop_requested_at__isnull=True).update(stop_requested_at=timezone.now())
    process = getattr(run, "training_process", None) if _has_process(run) else None
    if process is None or process.executor != Placement.RAY or not process.job_id:
        return
    from webapp.training.services import process_alive

    if process.hostname == socket.gethostname() and process_alive(process.supervisor_pid):
        return
    job_id = process.job_id

    def stop_job() -> None:
        from webapp.training import executors

        try:
            executors.job_client().stop_job(job_id)
        except Exception:  # the cluster is unreachable: the job's wrapper still hears ``stop`` from ingest
            logger.warning("run %s: cannot stop Ray job %s", run.pk, job_id, exc_info=True)

    transaction.on_commit(stop_job)
