"""A task executed by a real Celery worker process, against the real broker and the test database."""

from __future__ import annotations

import time

import pytest

from tests.webapp.celery_worker import celery_worker
from webapp.datasets.models import Question
from webapp.imports.models import ImportJob
from webapp.imports.tasks import import_job_run_task


@pytest.mark.slow  # starts a real Celery worker process: ~5 s
@pytest.mark.django_db(
    transaction=True
)  # committed rows: the worker is another process with its own connection
def test_it_runs_an_import_in_a_real_worker_process(tmp_path):
    data = tmp_path / "questions.jsonl"
    data.write_text('{"id": "w1", "question": "Who?", "golden_answers": ["Ann"]}\n')
    job = ImportJob.objects.create(
        kind=ImportJob.Kind.DATASET, name="from-worker", path=str(data), original_filename="questions.jsonl"
    )
    with celery_worker(tmp_path, queue="default") as worker:
        import_job_run_task.apply_async(args=[job.pk], queue=worker.queue, **worker.send_options)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and worker.alive():
            job.refresh_from_db()
            if job.status in (ImportJob.Status.FINISHED, ImportJob.Status.FAILED):
                break
            time.sleep(0.2)
    log = worker.log
    assert job.status == ImportJob.Status.FINISHED, f"job {job.status} {job.error}\n{log.read_text()[-3000:]}"
    assert Question.objects.get(external_id="w1").golden_answers == ["Ann"]
