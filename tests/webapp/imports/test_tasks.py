"""A task executed by a real Celery worker process, against the real broker and the test database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection

from webapp.celery import app as celery_app
from webapp.datasets.models import Question
from webapp.imports.models import ImportJob
from webapp.imports.tasks import import_job_run_task

ROOT = Path(__file__).resolve().parents[3]


def _test_database_url() -> str:
    """The URL of the database this test run created (test_<name>), for the worker to use the same rows."""
    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        return f"sqlite:///{name}"
    parts = urlsplit(settings.DATABASE_URL)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.mark.django_db(
    transaction=True
)  # committed rows: the worker is another process with its own connection
def test_it_runs_an_import_in_a_real_worker_process(tmp_path):
    data = tmp_path / "questions.jsonl"
    data.write_text('{"id": "w1", "question": "Who?", "golden_answers": ["Ann"]}\n')
    job = ImportJob.objects.create(
        kind=ImportJob.Kind.DATASET, name="from-worker", path=str(data), original_filename="questions.jsonl"
    )
    queue = f"test-{uuid.uuid4().hex[:10]}"  # a queue of its own: no other worker can take the task
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "DB_CONN_MAX_AGE": "0"}
    send_options: dict[str, object] = {}
    if settings.CELERY_BROKER_URL == "filesystem://":
        # The embedded broker, in a folder of this test's own, for the worker and the producer alike.
        env["CELERY_FS_DIR"] = str(tmp_path / "celery")
        folders = {
            k: str(tmp_path / "celery" / v)
            for k, v in (
                ("data_folder_in", "queue"),
                ("data_folder_out", "queue"),
                ("control_folder", "control"),
            )
        }
        for folder in folders.values():
            Path(folder).mkdir(parents=True, exist_ok=True)
        send_options["connection"] = celery_app.connection_for_write(transport_options=folders)
    log = tmp_path / "worker.log"
    with open(log, "w") as log_file:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "webapp",
                "worker",
                "-Q",
                queue,
                "--pool=solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        import_job_run_task.apply_async(args=[job.pk], queue=queue, **send_options)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and worker.poll() is None:
            job.refresh_from_db()
            if job.status in (ImportJob.Status.FINISHED, ImportJob.Status.FAILED):
                break
            time.sleep(0.2)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        connection_to_close = send_options.get("connection")
        if connection_to_close is not None:
            connection_to_close.release()  # type: ignore[attr-defined]
    assert job.status == ImportJob.Status.FINISHED, f"job {job.status} {job.error}\n{log.read_text()[-3000:]}"
    assert Question.objects.get(external_id="w1").golden_answers == ["Ann"]
