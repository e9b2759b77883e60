from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from webapp.imports.models import ImportJob
from webapp.imports.services import import_job_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def upload_dir(settings, tmp_path):
    settings.UPLOAD_DIR = tmp_path / "uploads"
    return settings.UPLOAD_DIR


def test_it_shows_the_import_page(researcher_client):
    response = researcher_client.get("/imports/")
    assert response.status_code == 200
    assert b"Upload and import" in response.content


def test_it_stores_an_upload_and_enqueues_its_import_on_commit(
    researcher_client, upload_dir, django_capture_on_commit_callbacks
):
    upload = SimpleUploadedFile("q.jsonl", b'{"id": "1", "question": "q?", "golden_answers": ["a"]}\n')
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = researcher_client.post("/imports/", {"kind": "dataset", "name": "toy", "file": upload})
    assert response.status_code == 302
    job = ImportJob.objects.get()
    assert (job.kind, job.name, job.original_filename, job.status) == ("dataset", "toy", "q.jsonl", "pending")
    assert job.path.startswith(str(upload_dir))
    assert len(callbacks) == 1

    import_job_run(job_id=job.pk)  # what the worker's task does
    job.refresh_from_db()
    assert (job.status, job.record_count) == ("finished", 1)


def test_it_records_the_error_of_a_failed_import(
    researcher_client, upload_dir, django_capture_on_commit_callbacks
):
    upload = SimpleUploadedFile("bad.jsonl", b'{"id": "1", "question": "q?"}\n')
    with django_capture_on_commit_callbacks(execute=False):
        researcher_client.post("/imports/", {"kind": "dataset", "name": "toy", "file": upload})
    job = import_job_run(job_id=ImportJob.objects.get().pk)
    assert job.status == "failed"
    assert job.error == "bad.jsonl, line 1: field 'golden_answers': missing"


def test_it_asks_for_a_name_for_a_dataset(researcher_client):
    upload = SimpleUploadedFile("q.jsonl", b"{}\n")
    response = researcher_client.post("/imports/", {"kind": "dataset", "file": upload})
    assert response.status_code == 200
    assert b"needs a name" in response.content
    assert not ImportJob.objects.exists()
