"""Uploads never fill the disk: size caps (upload, unpacked bundle) named in the error, a failed import's files
removed, old uploads cleaned, long file names stored safely."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from webapp.common.importing import DataImportError
from webapp.corpora.models import Corpus
from webapp.imports import services
from webapp.imports.forms import ImportForm
from webapp.imports.models import ImportJob
from webapp.imports.replay import replay_path

pytestmark = pytest.mark.django_db


@pytest.fixture
def upload_dir(settings, tmp_path):
    settings.UPLOAD_DIR = tmp_path / "uploads"
    settings.EXPERIMENTS_DIR = tmp_path / "experiments"
    return settings.UPLOAD_DIR


def test_a_file_name_of_250_characters_is_stored_cut_to_200_keeping_its_extension(
    upload_dir, django_capture_on_commit_callbacks
):
    name = "q" * 244 + ".jsonl"  # uuid + "-" + 250 characters would pass the file system's 255
    upload = SimpleUploadedFile(name, b'{"id": "1", "question": "q?", "golden_answers": ["a"]}\n')
    with django_capture_on_commit_callbacks(execute=False):
        job = services.import_job_create(kind=ImportJob.Kind.DATASET, upload=upload, name="d")
    stored = Path(job.path)
    assert stored.is_file() and stored.parent == upload_dir
    assert stored.name.endswith("q.jsonl") and len(stored.name) == 33 + 200
    assert job.original_filename == name
    assert services.import_job_run(job_id=job.pk).status == "finished"


def test_a_path_in_the_name_is_reduced_to_its_base_name():
    assert services.stored_name("..\\..\\evil/../x.jsonl") == "x.jsonl"
    assert services.stored_name("") == "upload"


def test_the_form_refuses_an_upload_over_the_cap_naming_it(settings):
    settings.UPLOAD_MAX_BYTES = 1024
    form = ImportForm({"kind": "dataset", "name": "d"}, {"file": SimpleUploadedFile("d.jsonl", b"x" * 2048)})
    assert not form.is_valid()
    assert form.errors["file"] == [
        "the file is 2,048 bytes, over the limit of 1,024 bytes (UPLOAD_MAX_BYTES)"
    ]


def test_an_upload_declaring_more_than_the_cap_is_a_413_before_it_is_stored(
    researcher_client, settings, upload_dir
):
    settings.UPLOAD_MAX_BYTES = 1024
    upload = SimpleUploadedFile("d.jsonl", b"x" * 4096)
    response = researcher_client.post("/imports/", {"kind": "dataset", "name": "d", "file": upload})
    assert response.status_code == 413
    assert "over the limit of 1,024 bytes (UPLOAD_MAX_BYTES)" in response.content.decode()
    assert not ImportJob.objects.exists()
    assert not upload_dir.exists() or not any(upload_dir.iterdir())


def test_a_failed_import_removes_its_file(upload_dir, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = services.import_job_create(
            kind=ImportJob.Kind.DATASET, upload=SimpleUploadedFile("bad.jsonl", b"not json\n"), name="d"
        )
    assert Path(job.path).is_file()
    job = services.import_job_run(job_id=job.pk)
    assert job.status == "failed" and "invalid JSON" in job.error
    assert not Path(job.path).exists()


def _age(path: Path, days: float) -> None:
    then = time.time() - days * 86400
    os.utime(path, (then, then))


def test_old_uploads_of_ended_jobs_are_cleaned_and_a_corpus_file_or_a_pending_job_is_kept(
    upload_dir, settings
):
    settings.UPLOAD_RETENTION_DAYS = 7
    upload_dir.mkdir(parents=True)
    files = {name: upload_dir / f"{name}.jsonl" for name in ("done", "orphan", "recent", "corpus", "pending")}
    for name, file in files.items():
        file.write_text("{}\n")
        _age(file, 1 if name == "recent" else 30)
    ImportJob.objects.create(
        kind="dataset", path=str(files["done"]), status="finished", original_filename="d"
    )
    ImportJob.objects.create(
        kind="dataset", path=str(files["pending"]), status="pending", original_filename="p"
    )
    Corpus.objects.create(name="c", source_path=str(files["corpus"]))
    assert services.uploads_clean() == 2
    assert sorted(f.stem for f in upload_dir.iterdir()) == ["corpus", "pending", "recent"]


def _bundle(tmp_path: Path, size: int, name: str = "out/zeros.bin") -> Path:
    """A tar.gz of a few KB that unpacks to ``size`` bytes of zeros (a decompression bomb in small)."""
    path = tmp_path / "bomb.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        member = tarfile.TarInfo(name)
        member.size = size
        archive.addfile(member, io.BytesIO(bytes(size)))
    return path


def _left_unpacked(settings) -> list[Path]:
    return [p for p in Path(settings.VAR_DIR).glob("*") if p.name.startswith(("spool-", "bundle-"))]


def test_a_spool_unpacking_beyond_the_cap_is_refused_naming_it_and_leaves_nothing(
    upload_dir, settings, tmp_path
):
    settings.UPLOAD_MAX_UNPACKED_BYTES = 1024 * 1024
    path = _bundle(tmp_path, 5 * 1024 * 1024)
    assert path.stat().st_size < 64 * 1024
    with pytest.raises(DataImportError, match=r"beyond 1,048,576 bytes .*UPLOAD_MAX_UNPACKED_"):
        replay_path(path, label="bomb.tar.gz")
    assert not _left_unpacked(settings)


def test_a_failed_experiment_replay_removes_what_it_unpacked(upload_dir, settings, tmp_path):
    path = _bundle(tmp_path, 10, "out/experiment.json")  # an old bundle whose experiment.json is no JSON
    with pytest.raises(DataImportError, match=r"b\.tar\.gz:out/experiment\.json, line 1: invalid JSON"):
        replay_path(path, index_folder=tmp_path, label="b.tar.gz")
    assert not _left_unpacked(settings)
