from __future__ import annotations

import pytest

from webapp.imports import services
from webapp.imports.models import ImportJob

pytestmark = pytest.mark.django_db


def test_it_marks_a_job_failed_on_an_unexpected_error_and_reraises(monkeypatch):
    job = ImportJob.objects.create(
        kind=ImportJob.Kind.CORPUS, name="c", path="/nowhere", original_filename="c"
    )

    def boom(job):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(services, "_import", boom)
    with pytest.raises(RuntimeError):
        services.import_job_run(job_id=job.pk)
    job.refresh_from_db()
    assert (job.status, job.error) == ("failed", "internal error: RuntimeError: disk on fire")


def test_it_runs_a_job_once_even_if_the_message_comes_twice(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "1", "question": "q?", "golden_answers": ["a"]}\n')
    job = ImportJob.objects.create(
        kind=ImportJob.Kind.DATASET, name="d", path=str(data), original_filename="q"
    )
    assert services.import_job_run(job_id=job.pk).status == "finished"
    assert (
        services.import_job_run(job_id=job.pk).status == "finished"
    )  # no "a dataset named 'd' exists" failure
