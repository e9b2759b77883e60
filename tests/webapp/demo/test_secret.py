"""The demo's secret: random, made once under var/; no process exposed beyond loopback with DEBUG or the old
development key; a token forged with that key is refused."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core import signing

from webapp.common.exposure import (
    DEVELOPMENT_SECRET_KEY,
    bind_addresses,
    exposure_problem,
    is_loopback,
    stored_secret_key,
)
from webapp.runs.models import Run
from webapp.runs.services import run_create
from webapp.training import ingest

ROOT = Path(__file__).resolve().parents[3]
PRINT_KEY = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"


def _start(args: list[str], var: Path, **env: str) -> subprocess.CompletedProcess[str]:
    unset = ("SECRET_KEY", "SEARCHLAB_ENV", "DEBUG", "DEMO_ADDR", "SEARCHLAB_BIND", "GUNICORN_CMD_ARGS")
    environment = {k: v for k, v in os.environ.items() if k not in unset}
    environment |= {"DJANGO_SETTINGS_MODULE": "webapp.settings", "SEARCHLAB_VAR_DIR": str(var), **env}
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_development_process_makes_a_random_key_once_and_keeps_it(tmp_path):
    first = _start(["-c", PRINT_KEY], tmp_path)
    second = _start(["-c", PRINT_KEY], tmp_path)
    assert first.returncode == 0, first.stderr
    key = first.stdout.strip()
    assert len(key) >= 50 and key != DEVELOPMENT_SECRET_KEY
    assert second.stdout.strip() == key  # kept: sessions and tokens survive a restart
    stored = tmp_path / "secret_key"
    assert stored.read_text().strip() == key
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert stored_secret_key(tmp_path / "other" / "secret_key") != key  # another installation, another key


def test_the_demo_refuses_to_serve_beyond_loopback_with_debug_saying_what_to_set(tmp_path):
    # --seed-only: were the check missing, nothing would be served
    result = _start(["manage.py", "demo", "0.0.0.0:8080", "--seed-only"], tmp_path)
    assert result.returncode != 0
    assert "refuses to start bound to 0.0.0.0:8080 (beyond loopback) with DEBUG on" in result.stderr
    assert "Set DEBUG=0" in result.stderr
    assert not (tmp_path / "searchlab.sqlite3").exists()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"SECRET_KEY": DEVELOPMENT_SECRET_KEY, "DEBUG": "0", "SEARCHLAB_BIND": "0.0.0.0:8000"},
            "SECRET_KEY",
        ),
        ({"SEARCHLAB_ENV": "production", "SECRET_KEY": DEVELOPMENT_SECRET_KEY}, "development SECRET_KEY"),
        ({"SEARCHLAB_ENV": "production", "SECRET_KEY": "s" * 50, "DEBUG": "1"}, "with DEBUG on"),
    ],
)
def test_a_deployment_or_an_exposed_process_refuses_debug_or_the_development_key(tmp_path, env, message):
    result = _start(["-c", PRINT_KEY], tmp_path, **env)
    assert result.returncode != 0
    assert "refuses to start" in result.stderr and message in result.stderr


def test_an_exposed_process_without_debug_and_with_its_own_key_starts(tmp_path):
    result = _start(["-c", PRINT_KEY], tmp_path, DEBUG="0", SEARCHLAB_BIND="0.0.0.0:8000")
    assert result.returncode == 0, result.stderr


@pytest.mark.django_db
def test_a_token_forged_with_the_old_hard_coded_key_is_refused(client):
    assert settings.SECRET_KEY != DEVELOPMENT_SECRET_KEY
    run = run_create(name="r", method="hiprag", model_name="m", kind=Run.Kind.TRAIN, algorithm="grpo")
    forged = signing.dumps({"run": run.pk, "gen": 0}, salt=ingest.TOKEN_SALT, key=DEVELOPMENT_SECRET_KEY)
    url = f"/api/v1/runs/{run.pk}/ingest/"
    batch = {"metrics": [{"step": 1, "key": "reward", "value": 0.5, "time": 1_700_000_000.0}]}
    response = client.post(url, batch, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {forged}")
    assert response.status_code == 401
    genuine = ingest.ingest_token(run.pk)
    response = client.post(
        url, batch, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {genuine}"
    )
    assert response.status_code == 200, response.content
    assert run.metrics.count() == 1


def test_it_tells_loopback_from_exposed_addresses():
    assert all(
        is_loopback(a) for a in ("127.0.0.1:8000", "127.8.9.1:80", "localhost:8000", "[::1]:8000", "8000")
    )
    assert not any(is_loopback(a) for a in ("0.0.0.0:8080", "[::]:8000", "10.0.0.5:8000", "example.org:80"))


def test_it_reads_the_bind_address_of_each_way_to_serve():
    assert bind_addresses(["manage.py", "demo", "0.0.0.0:8080"], {}) == ["0.0.0.0:8080"]
    assert bind_addresses(["manage.py", "runserver"], {}) == ["127.0.0.1:8000"]
    assert bind_addresses(["manage.py", "migrate"], {}) == []
    assert bind_addresses(["pytest", "-k", "demo", "tests/x.py"], {}) == []
    assert bind_addresses(["/usr/bin/gunicorn", "webapp.wsgi", "--bind", "0.0.0.0:8000"], {}) == [
        "0.0.0.0:8000"
    ]
    module = "/venv/lib/python3.11/site-packages/gunicorn/__main__.py"  # python -m gunicorn
    assert bind_addresses([module, "webapp.wsgi", "-b", "[::]:80"], {}) == ["[::]:80"]
    assert bind_addresses(["x"], {"GUNICORN_CMD_ARGS": "-b 10.1.1.1:80", "DEMO_ADDR": "127.0.0.1:8000"}) == [
        "127.0.0.1:8000",
        "10.1.1.1:80",
    ]
    assert (
        exposure_problem(production=False, debug=True, secret_key="k", addresses=["127.0.0.1:8000"]) is None
    )
