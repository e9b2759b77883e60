"""Writes on corpora: the FlashRAG corpus import, and index builds (created here, built by a retrieval worker)."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from webapp.common.importing import (
    DataImportError,
    RecordReader,
    batched,
    copy_rows,
    iter_jsonl,
    on_postgresql,
)
from webapp.corpora.models import Corpus, Index, Passage


def split_contents(contents: str) -> tuple[str, str]:
    """FlashRAG's ``contents`` is ``"Title\\ntext"``; the 2018 Wikipedia dump quotes the title.

    >>> split_contents('"Aaron"\\nAaron is a prophet.')
    ('Aaron', 'Aaron is a prophet.')
    """
    title, sep, text = contents.partition("\n")
    if not sep:
        return "", contents
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text


def _passage_rows(path: Path, name: str) -> Iterator[tuple[str, str, str, int]]:
    seen: dict[str, int] = {}
    for number, record in iter_jsonl(path, name=name):
        reader = RecordReader(record, file=name, line=number)
        external_id = reader.text("id")
        contents = reader.text("contents")
        assert external_id is not None and contents is not None
        if external_id in seen:
            raise reader.error("id", f"duplicate id {external_id!r} (first on line {seen[external_id]})")
        seen[external_id] = number
        title, text = split_contents(contents)
        yield external_id, title, text, number


@transaction.atomic
def corpus_import(*, name: str, path: str | Path, display_name: str | None = None) -> Corpus:
    """Import a FlashRAG JSONL corpus (``{"id", "contents": "Title\\ntext"}`` per line) as a new corpus."""
    path = Path(path)
    label = display_name or str(path)
    if Corpus.objects.filter(name=name).exists():
        raise DataImportError(file=label, line=None, field="name", message=f"a corpus named {name!r} exists")
    corpus = Corpus.objects.create(name=name, source_path=str(path))
    rows = _passage_rows(path, label)
    if on_postgresql():
        count = copy_rows(
            Passage,
            ["corpus", "external_id", "title", "text"],
            ((corpus.pk, external_id, title, text) for external_id, title, text, _ in rows),
        )
    else:
        count = 0
        for batch in batched(rows):
            Passage.objects.bulk_create(
                Passage(corpus=corpus, external_id=external_id, title=title, text=text)
                for external_id, title, text, _ in batch
            )
            count += len(batch)
    corpus.passage_count = count
    corpus.save(update_fields=["passage_count"])
    return corpus


# --- Index builds ------------------------------------------------------------------------------------------------

# A progress report is written at most this often (a build reports every encoded batch), or when the stage changes.
PROGRESS_WRITE_SECONDS = 0.5
HEARTBEAT_SECONDS = 5.0  # a beat even when the progress bar has not moved (see index_mark_crashed)


def index_folder(*, index_id: int) -> Path:
    return Path(settings.RETRIEVAL_INDEX_DIR) / str(index_id)


def _unique_index_name(corpus: Corpus, base: str) -> str:
    taken = set(corpus.indexes.filter(name__startswith=base).values_list("name", flat=True))
    if base not in taken:
        return base
    return next(f"{base}-{n}" for n in range(2, len(taken) + 3) if f"{base}-{n}" not in taken)


def default_index_name(*, kind: str, encoder: str) -> str:
    """``hnsw-all-MiniLM-L6-v2``, ``bm25``: the kind and the encoder's last path part.

    >>> default_index_name(kind="flat", encoder="sentence-transformers/all-MiniLM-L6-v2")
    'flat-all-MiniLM-L6-v2'
    """
    if not encoder:
        return kind
    return f"{kind}-{encoder.rstrip('/').rsplit('/', 1)[-1]}"[:200]


@transaction.atomic
def index_create(*, corpus: Corpus, kind: str, encoder: str, name: str = "", enqueue: bool = True) -> Index:
    """A pending index of the corpus, and its build on the ``retrieval`` queue once the row is committed
    (``enqueue=False``: the caller builds it with :func:`index_build`, as ``manage.py demo`` does).

    BM25 has no encoder: whatever was chosen is dropped, so the row says what the index really is.
    """
    from webapp.corpora.tasks import index_build_task

    encoder = "" if kind == Index.Kind.BM25 else encoder
    name = name.strip() or _unique_index_name(corpus, default_index_name(kind=kind, encoder=encoder))
    index = Index.objects.create(corpus=corpus, name=name, kind=kind, encoder=encoder)
    index.path = str(index_folder(index_id=index.pk))
    index.save(update_fields=["path"])
    if enqueue:
        transaction.on_commit(lambda: index_build_task.delay(index.pk))
    return index


def corpus_for_file(*, path: str) -> Corpus:
    """The corpus row of a corpus file whose passages stay in the file (an index built outside the worker reads
    them from there): the oldest row with that source, else a new one named after the file's folder and stem."""
    corpus = Corpus.objects.filter(source_path=path).order_by("pk").first()
    if corpus is not None:
        return corpus
    base = f"{Path(path).parent.name or 'corpus'}-{Path(path).stem}"
    name, n = base, 1
    while Corpus.objects.filter(name=name).exists():
        n += 1
        name = f"{base}-{n}"
    return Corpus.objects.create(name=name, source_path=path, passage_count=0)


def index_register_ready(*, corpus: Corpus, folder: str | Path, name: str = "") -> Index:
    """A ready Index row for a folder built outside the retrieval worker (``retrieval.index.build_index``), as
    :func:`index_build` would have left it; its metadata comes from the folder (``RetrievalIndexError`` when it
    has none). The name is the folder's (made unique in the corpus) unless given."""
    from retrieval.index import IndexMetadata, index_size_bytes

    folder = Path(folder)
    metadata = IndexMetadata.read(folder)
    return Index.objects.create(
        corpus=corpus,
        name=name or _unique_index_name(corpus, folder.name),
        kind=metadata.kind,
        encoder="" if metadata.kind == "bm25" else metadata.encoder,
        path=str(folder),
        status=Index.Status.READY,
        progress=1.0,
        build_seconds=metadata.build_seconds,
        size_bytes=index_size_bytes(folder),
        metadata=asdict(metadata),
        finished_at=timezone.now(),
    )


class _ProgressWriter:
    """Maps ``build_index``'s ``(stage, done, total)`` onto ``Index.progress`` / ``stage``, throttled, so a build
    reporting every batch of a 21M-passage corpus costs a few writes a second, not thousands."""

    def __init__(self, index_id: int) -> None:
        self.index_id = index_id
        self.stage = ""
        self.fraction = 0.0
        self.written_at = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        from retrieval.index import build_fraction

        fraction = max(self.fraction, build_fraction(stage, done, total))  # never moves the bar backwards
        now = time.monotonic()
        beat_due = now - self.written_at >= HEARTBEAT_SECONDS  # alive, even when the bar has not moved
        if (
            stage == self.stage
            and (fraction == self.fraction or now - self.written_at < PROGRESS_WRITE_SECONDS)
            and not beat_due
        ):
            return
        self.stage, self.fraction, self.written_at = stage, fraction, now
        Index.objects.filter(pk=self.index_id, status=Index.Status.BUILDING).update(
            stage=stage, progress=fraction, heartbeat_at=timezone.now()
        )


def index_build(*, index_id: int) -> Index:
    """Build a pending index in this (worker) process: status building → ready, or failed with the error.

    Claimed with a conditional update, so a redelivered message never builds the same index twice.
    """
    from retrieval.encoders import DEFAULT_ENCODER
    from retrieval.index import IndexConfig, build_index, index_size_bytes

    claimed = Index.objects.filter(pk=index_id, status=Index.Status.PENDING).update(
        status=Index.Status.BUILDING,
        started_at=timezone.now(),
        heartbeat_at=timezone.now(),
        progress=0.0,
        stage="",
        error="",
    )
    index = Index.objects.select_related("corpus").get(pk=index_id)
    if not claimed:
        return index
    try:
        source = index.corpus.source_path
        if not source or not Path(source).is_file():
            raise FileNotFoundError(f"corpus {index.corpus.name!r} has no source file at {source!r}")
        metadata = build_index(
            source,
            index.path,
            IndexConfig(kind=index.kind, encoder=index.encoder or DEFAULT_ENCODER),  # type: ignore[arg-type]
            progress=_ProgressWriter(index_id),
            embeddings_cache=Path(settings.RETRIEVAL_EMBEDDINGS_DIR),
        )
    except Exception as error:  # a bad corpus row, a missing model, a full disk: the page shows why
        index_mark_failed(index_id=index_id, error=f"{type(error).__name__}: {error}")
        raise
    Index.objects.filter(pk=index_id).update(
        status=Index.Status.READY,
        progress=1.0,
        stage="",
        build_seconds=metadata.build_seconds,
        size_bytes=index_size_bytes(index.path),
        metadata=asdict(metadata),
        finished_at=timezone.now(),
    )
    index.refresh_from_db()
    return index


def index_mark_failed(*, index_id: int, error: str) -> None:
    Index.objects.filter(pk=index_id).update(
        status=Index.Status.FAILED, error=error[:10_000], finished_at=timezone.now()
    )


def index_mark_crashed(*, now: dt.datetime | None = None) -> list[int]:
    """Fail the builds that stopped beating: building, and no progress write for INDEX_HEARTBEAT_TIMEOUT_SECONDS
    (a build writes at least every HEARTBEAT_SECONDS while its corpus is read and encoded; one long FAISS step is
    why the timeout is minutes). The page then offers Rebuild and Delete. Celery beat runs this every minute."""
    now = now or timezone.now()
    cutoff = now - dt.timedelta(seconds=settings.INDEX_HEARTBEAT_TIMEOUT_SECONDS)
    stale = Index.objects.filter(status=Index.Status.BUILDING).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )
    crashed = []
    for index in stale.only("pk", "heartbeat_at", "started_at"):
        last = index.heartbeat_at or index.started_at or now
        seconds = int((now - last).total_seconds())
        updated = Index.objects.filter(pk=index.pk, status=Index.Status.BUILDING).update(
            status=Index.Status.FAILED,
            error=f"the build stopped: no progress for {seconds} s (its retrieval worker died?). Rebuild or delete it.",
            finished_at=now,
        )
        if updated:
            crashed.append(index.pk)
    return crashed


@transaction.atomic
def index_rebuild(*, index_id: int) -> Index:
    """A failed (or ready) index back to pending, its folder removed, its build queued again."""
    from webapp.corpora.tasks import index_build_task

    index = Index.objects.select_for_update().get(pk=index_id)
    if index.status in (Index.Status.PENDING, Index.Status.BUILDING):
        raise IndexBusyError(
            f"index {index.name} is {index.status}; wait for it or for its crash to be noticed"
        )
    shutil.rmtree(index.path, ignore_errors=True)
    Index.objects.filter(pk=index_id).update(
        status=Index.Status.PENDING,
        progress=0.0,
        stage="",
        error="",
        started_at=None,
        heartbeat_at=None,
        finished_at=None,
        build_seconds=None,
        size_bytes=None,
        metadata={},
    )
    transaction.on_commit(lambda: index_build_task.delay(index_id))
    index.refresh_from_db()
    return index


@transaction.atomic
def index_delete(*, index_id: int) -> str:
    """Delete an index that is not building (its row and its folder); returns its name."""
    index = Index.objects.select_for_update().get(pk=index_id)
    if index.status == Index.Status.BUILDING:
        raise IndexBusyError(f"index {index.name} is building; wait for it or for its crash to be noticed")
    path, name = index.path, index.name
    index.delete()
    transaction.on_commit(lambda: shutil.rmtree(path, ignore_errors=True))
    return name


class IndexBusyError(RuntimeError):
    """The index is being built: it can be neither rebuilt nor deleted now."""
