"""Writes on corpora: the FlashRAG corpus import, and index builds (created here, built by a retrieval worker)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from django.conf import settings
from django.db import transaction
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
def index_create(*, corpus: Corpus, kind: str, encoder: str, name: str = "") -> Index:
    """A pending index of the corpus, and its build on the ``retrieval`` queue once the row is committed.

    BM25 has no encoder: whatever was chosen is dropped, so the row says what the index really is.
    """
    from webapp.corpora.tasks import index_build_task

    encoder = "" if kind == Index.Kind.BM25 else encoder
    name = name.strip() or _unique_index_name(corpus, default_index_name(kind=kind, encoder=encoder))
    index = Index.objects.create(corpus=corpus, name=name, kind=kind, encoder=encoder)
    index.path = str(index_folder(index_id=index.pk))
    index.save(update_fields=["path"])
    transaction.on_commit(lambda: index_build_task.delay(index.pk))
    return index


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
        if stage == self.stage and (
            fraction == self.fraction or now - self.written_at < PROGRESS_WRITE_SECONDS
        ):
            return
        self.stage, self.fraction, self.written_at = stage, fraction, now
        Index.objects.filter(pk=self.index_id, status=Index.Status.BUILDING).update(
            stage=stage, progress=fraction
        )


def index_build(*, index_id: int) -> Index:
    """Build a pending index in this (worker) process: status building → ready, or failed with the error.

    Claimed with a conditional update, so a redelivered message never builds the same index twice.
    """
    from retrieval.encoders import DEFAULT_ENCODER
    from retrieval.index import IndexConfig, build_index, index_size_bytes

    claimed = Index.objects.filter(pk=index_id, status=Index.Status.PENDING).update(
        status=Index.Status.BUILDING, started_at=timezone.now(), progress=0.0, stage="", error=""
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
