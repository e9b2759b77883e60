"""`make demo` serves before its warm start has finished, and SIGTERM or Ctrl-C ends everything it started.

The real thing, on a fresh VAR_DIR: make, `manage.py demo`, the web server, both Celery workers (beat inside one),
the supervisor and `python -m trainer.warm_start` training SmolLM2 in the background. The login page answers while
the warm start runs; SIGTERM to make, or a terminal's Ctrl-C, then leaves no process behind and the warm-start run marked with the reason.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO_ROOT, smollm2_path

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait(what: str, check, seconds: float, demo: subprocess.Popen[bytes], log: Path):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if demo.poll() is not None:
            raise AssertionError(
                f"make demo exited ({demo.returncode}) before {what}:\n{log.read_text()[-3000:]}"
            )
        time.sleep(0.5)
    raise AssertionError(f"no {what} after {seconds} s:\n{log.read_text()[-3000:]}")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _warm_start(db: Path) -> tuple[int, str, str, int | None] | None:
    """(run id, status, error, trainer pid) of the demo's warm-start run, once the database has one."""
    if not db.is_file():
        return None
    with sqlite3.connect(db, timeout=5) as connection:
        try:
            row = connection.execute(
                "SELECT r.id, r.status, r.error, p.pid FROM runs_run r LEFT JOIN training_trainingprocess p "
                "ON p.run_id = r.id WHERE r.kind = 'warm_start' ORDER BY r.id DESC LIMIT 1"
            ).fetchone()
        except sqlite3.OperationalError:  # not migrated yet, or locked for a moment
            return None
    return (int(row[0]), str(row[1]), str(row[2]), row[3]) if row else None


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("stop", ["SIGTERM", "Ctrl-C"])
def test_stopping_make_demo_ends_the_server_workers_beat_and_the_warm_start(tmp_path, stop):
    var = tmp_path / "var"
    (var / "models").mkdir(parents=True)
    (var / "models" / "SmolLM2-135M-Instruct").symlink_to(smollm2_path())
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    env.update(SEARCHLAB_VAR_DIR=str(var), PYTHONUNBUFFERED="1")
    log = tmp_path / "demo.log"
    with log.open("wb") as sink:
        demo = subprocess.Popen(
            ["make", "--no-print-directory", "demo", f"DEMO_ADDR=127.0.0.1:{port}"],
            cwd=REPO_ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the test's own signal only, as a terminal's kill would send
        )
    try:
        started = time.monotonic()
        _wait("login page", lambda: _answers(f"http://127.0.0.1:{port}/accounts/login/"), 300, demo, log)
        served = time.monotonic() - started
        db = var / "searchlab.sqlite3"
        run_id, status, _, trainer = _wait(
            "running warm start with a trainer",
            lambda: (w := _warm_start(db)) and w[1] == "running" and w[3] and w,
            300,
            demo,
            log,
        )
        assert "searchlab: http://127.0.0.1" in log.read_text()
        processes = psutil.Process(demo.pid).children(recursive=True)
        processes += [p for p in psutil.process_iter() if _pgid(p.pid) == trainer]
        names = " ".join(" ".join(p.cmdline()[1:4]) for p in processes if not _gone(p))
        for part in ("manage.py demo", "celery", "trainer.warm_start"):
            assert part in names, (part, names)

        if stop == "SIGTERM":
            demo.send_signal(signal.SIGTERM)  # make passes it on to `manage.py demo`
        else:
            os.killpg(demo.pid, signal.SIGINT)  # a terminal's Ctrl-C: make and `manage.py demo` hear it
        # make waits for `manage.py demo`, then ends by the same signal (GNU make's way).
        assert demo.wait(timeout=180) in (0, 2, -signal.SIGTERM, -signal.SIGINT), log.read_text()[-3000:]
        assert "stopped; 1 active run(s) marked with the reason" in log.read_text()
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
    left = [p for p in processes if not _gone(p)]
    assert not left, [p.cmdline() for p in left]
    _, status, error, _ = _warm_start(db) or (0, "", "", None)
    assert status in ("cancelled", "crashed") and "make demo" in error and stop in error, (status, error)
    print(f"login page after {served:.0f} s; warm-start run #{run_id} stopped: {error}")


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
