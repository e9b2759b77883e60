"""Writes on import jobs: store an upload, enqueue its import on commit, run it in a worker, clean old uploads.

An upload is refused over ``UPLOAD_MAX_BYTES``, stored under ``UPLOAD_DIR`` by its base name cut to 200
characters; a failed import's file is deleted at once, and :func:`uploads_clean` (hourly, Celery beat) deletes the
files of ended jobs older than ``UPLOAD_RETENTION_DAYS`` (a corpus's own file stays: its index is built from it)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from webapp.common.importing import DataImportError
from webapp.corpora.services import corpus_import
from webapp.datasets.services import dataset_import
from webapp.imports.models import ImportJob
from webapp.trajectories.services import trajectory_import

# Characters of an upload's own name kept in its stored file's name (a file system allows 255 in all).
MAX_STORED_NAME = 200


class UploadTooLarge(ValueError):
    """An upload over ``UPLOAD_MAX_BYTES``: refused before it is stored."""


def upload_size_check(size: int | None) -> None:
    limit = settings.UPLOAD_MAX_BYTES
    if size is not None and size > limit:
        raise UploadTooLarge(
            f"the file is {size:,} bytes, over the limit of {limit:,} bytes (UPLOAD_MAX_BYTES)"
        )


def stored_name(name: str | None) -> str:
    """The base name of an upload (no folders), cut to ``MAX_STORED_NAME`` characters keeping its extensions
    (``.tar.gz``, ``.jsonl``), so that the stored file's name always fits the file system's limit.

    >>> stored_name("../../etc/" + "x" * 300 + ".tar.gz")[-12:], len(stored_name("x" * 300 + ".tar.gz"))
    ('xxxxx.tar.gz', 200)
    """
    base = Path((name or "upload").replace("\\", "/")).name or "upload"
    if len(base) <= MAX_STORED_NAME:
        return base
    suffix = "".join(Path(base).suffixes[-2:])
    suffix = suffix if len(suffix) <= 20 else ""
    return base[: MAX_STORED_NAME - len(suffix)] + suffix


def _store_upload(upload: UploadedFile) -> Path:
    upload_size_check(upload.size)
    settings.UPLOAD_DIR.mkdir(parents=True, exist_ok=True)
    target = settings.UPLOAD_DIR / f"{uuid.uuid4().hex}-{stored_name(upload.name)}"
    try:
        with open(target, "wb") as handle:
            for chunk in upload.chunks():
                handle.write(chunk)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return target


def _remove_upload(path: str) -> None:
    """Delete a stored upload, if it lies in ``UPLOAD_DIR`` (a job's path is never trusted to point elsewhere)."""
    if not path:
        return
    file = Path(path)
    if file.resolve().parent == Path(settings.UPLOAD_DIR).resolve():
        file.unlink(missing_ok=True)


def uploads_clean(*, now: datetime | None = None) -> int:
    """Delete stored uploads older than ``UPLOAD_RETENTION_DAYS``: those of ended jobs and those no job names.

    A corpus's upload stays as long as the corpus names it (its index is built from that file), and so does the
    file of a job still pending or running. Returns the number of files deleted.
    """
    from webapp.corpora.models import Corpus

    folder = Path(settings.UPLOAD_DIR)
    if not folder.is_dir():
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=settings.UPLOAD_RETENTION_DAYS)
    active = ImportJob.objects.filter(status__in=(ImportJob.Status.PENDING, ImportJob.Status.RUNNING))
    keep = {
        str(Path(p).resolve())
        for p in [
            *active.values_list("path", flat=True),
            *Corpus.objects.exclude(source_path="").values_list("source_path", flat=True),
        ]
    }
    removed = 0
    for file in folder.iterdir():
        if not file.is_file() or str(file.resolve()) in keep:
            continue
        if datetime.fromtimestamp(file.stat().st_mtime, tz=UTC) < cutoff:
            file.unlink(missing_ok=True)
            removed += 1
    return removed


@transaction.atomic
def import_job_create(
    *,
    kind: str,
    upload: UploadedFile,
    name: str = "",
    options: dict[str, Any] | None = None,
    created_by: AbstractBaseUser | None = None,
) -> ImportJob:
    from webapp.imports.tasks import import_job_run_task

    path = _store_upload(upload)
    job = ImportJob.objects.create(
        kind=kind,
        name=name,
        path=str(path),
        original_filename=(upload.name or "")[-300:],
        options=options or {},
        created_by=created_by,
    )
    transaction.on_commit(lambda: import_job_run_task.delay(job.pk))
    return job


def _import(job: ImportJob) -> int:
    display = job.original_filename or job.path
    if job.kind == ImportJob.Kind.CORPUS:
        return corpus_import(name=job.name, path=job.path, display_name=display).passage_count
    if job.kind in (ImportJob.Kind.DATASET, ImportJob.Kind.DATASET_PARQUET):
        file_format = "search_r1" if job.kind == ImportJob.Kind.DATASET_PARQUET else "flashrag"
        return dataset_import(
            name=job.name, path=job.path, file_format=file_format, display_name=display
        ).question_count
    if job.kind == ImportJob.Kind.SPOOL:
        return _spool_import(job, display)
    count = trajectory_import(
        path=job.path,
        run_id=job.options.get("run_id"),
        dataset_name=job.options.get("dataset") or None,
        display_name=display,
    )
    _report_ensure(job.options.get("run_id"))
    return count


def _report_ensure(run_id: int | None) -> None:
    """An evaluation run's report from its imported trajectories, so the runs list and the report show its numbers
    at once rather than after someone first opens the report."""
    from webapp.evaluation.services import evaluation_report_ensure
    from webapp.runs.models import Run

    if run_id and Run.objects.filter(pk=run_id, kind=Run.Kind.EVAL).exists():
        evaluation_report_ensure(run_id=run_id)


def _spool_import(job: ImportJob, display: str) -> int:
    """A spool (webapp.imports.replay): a run's, whose run the job keeps and whose metric points and samples it
    counts; or an experiment's (or an older experiment bundle), whose experiment the job keeps and whose
    trajectories it counts."""
    from webapp.corpora.models import Index
    from webapp.imports.replay import replay_path

    index_id = job.options.get("index_id")
    index = Index.objects.filter(pk=index_id).first() if index_id else None
    if index_id and index is None:
        raise DataImportError(
            file=display, line=None, field="index", message="the chosen index no longer exists"
        )
    replayed = replay_path(
        Path(job.path),
        label=display,
        index_folder=index.path if index else None,
        run_id=job.options.get("run_id"),
        user=job.created_by,
        name=job.name,
    )
    found = {"experiment_id": replayed.experiment_id} if replayed.experiment_id else {}
    if replayed.run_id:
        found = {"run_id": replayed.run_id, "refused": replayed.refused}
    job.options = {**job.options, **found, "replay": replayed.lines[0]}
    job.save(update_fields=["options"])
    return replayed.records


def import_job_run(*, job_id: int) -> ImportJob:
    """Run a pending import. The import itself is one transaction: on a bad record nothing of it is kept, and the
    job records the error (file, line, field)."""
    claimed = ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.PENDING).update(
        status=ImportJob.Status.RUNNING
    )
    job = ImportJob.objects.get(pk=job_id)
    if not claimed:
        return job  # already run (a redelivered message)
    started = time.perf_counter()
    unexpected: Exception | None = None
    try:
        job.record_count = _import(job)
        job.status = ImportJob.Status.FINISHED
    except DataImportError as exc:
        job.status, job.error = ImportJob.Status.FAILED, str(exc)
    except Exception as exc:  # a bug or a lost database: the job must not stay "running" forever
        job.status, job.error = ImportJob.Status.FAILED, f"internal error: {type(exc).__name__}: {exc}"
        unexpected = exc
    if job.status == ImportJob.Status.FAILED:
        _remove_upload(job.path)  # nothing of the import was kept, so neither is its file
    job.seconds = time.perf_counter() - started
    job.save(update_fields=["status", "error", "record_count", "seconds"])
    if unexpected is not None:
        raise unexpected  # logged by the worker with its traceback
    return job
