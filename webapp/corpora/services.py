"""Writes on corpora: the FlashRAG corpus import."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from django.db import transaction

from webapp.common.importing import (
    DataImportError,
    RecordReader,
    batched,
    copy_rows,
    iter_jsonl,
    on_postgresql,
)
from webapp.corpora.models import Corpus, Passage


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
