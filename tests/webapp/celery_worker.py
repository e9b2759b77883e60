"""A real Celery worker process for tests: the test database, and a queue (or broker folder) of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import connection

from webapp.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]


def worker_database_url() -> str:
    """The URL of the database this test run created (test_<name>), for the worker to use the same rows."""
    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        return f"sqlite:///{name}"
    return urlunsplit(urlsplit(settings.DATABASE_URL)._replace(path=f"/{name}"))


@dataclass
class Worker:
    queue: str
    log: Path
    send_options: dict[str, Any] = field(default_factory=dict)  # pass to apply_async(..., **send_options)
    process: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@contextmanager
def celery_worker(
    folder: Path, *, queue: str, env: Mapping[str, str] | None = None, grace: float = 20
) -> Iterator[Worker]:
    """Start ``celery worker -Q <queue>`` against the test database, stop it on exit.

    With the embedded filesystem broker the worker and the producer share a broker folder under ``folder`` that
    no other process reads, so the queue keeps its real name. On a shared Redis the queue gets a unique suffix,
    so no other worker can take the test's task.
    """
    worker_env = {**os.environ, "DATABASE_URL": worker_database_url(), "DB_CONN_MAX_AGE": "0", **(env or {})}
    handle = Worker(queue=queue, log=folder / "worker.log")
    if settings.CELERY_BROKER_URL == "filesystem://":
        worker_env["CELERY_FS_DIR"] = str(folder / "celery")
        folders = {
            key: str(folder / "celery" / sub)
            for key, sub in (
                ("data_folder_in", "queue"),
                ("data_folder_out", "queue"),
                ("control_folder", "control"),
            )
        }
        for path in folders.values():
            Path(path).mkdir(parents=True, exist_ok=True)
        handle.send_options["connection"] = celery_app.connection_for_write(transport_options=folders)
    else:
        handle.queue = f"{queue}-test-{uuid.uuid4().hex[:8]}"
    with open(handle.log, "w") as log_file:
        process = subprocess.Popen(
            [
                *(
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "webapp",
                    "worker",
                    "-Q",
                    handle.queue,
                    "--pool=solo",
                ),
                *("--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO"),
            ],
            cwd=ROOT,
            env=worker_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    handle.process = process
    try:
        yield handle
    finally:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        connection_to_close = handle.send_options.get("connection")
        if connection_to_close is not None:
            connection_to_close.release()
