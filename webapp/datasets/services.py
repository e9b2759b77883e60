"""Writes on datasets: FlashRAG JSONL and Search-R1 parquet imports."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.db import transaction

from webapp.common.importing import (
    DataImportError,
    RecordReader,
    batched,
    copy_rows,
    iter_jsonl,
    on_postgresql,
)
from webapp.datasets.models import Dataset, Question

# One row ready to insert: line, external id, text, golden answers, data source, metadata.
QuestionRow = tuple[int, str, str, list[str], str, dict[str, Any]]

# Search-R1's prompts end with "Question: <question>\n"; the stored text is the question alone.
_SEARCH_R1_QUESTION = re.compile(r"Question:\s*(.+?)\s*$", re.DOTALL)


def _flashrag_rows(path: Path, label: str) -> Iterator[QuestionRow]:
    for number, record in iter_jsonl(path, name=label):
        reader = RecordReader(record, file=label, line=number)
        external_id = reader.text("id")
        text = reader.text("question")
        golds = reader.text_list("golden_answers")
        metadata = reader.mapping("metadata")
        assert external_id is not None and text is not None
        source = metadata.get("data_source")
        yield number, external_id, text, golds, source if isinstance(source, str) else "", metadata


def _nested(record: dict[str, Any], dotted: str) -> Any:
    value: Any = record
    for part in dotted.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


def _search_r1_rows(path: Path, label: str) -> Iterator[QuestionRow]:
    import pyarrow.parquet as pq  # only this import needs pyarrow

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not parquet
        raise DataImportError(
            file=label, line=None, field=None, message=f"not a parquet file: {exc}"
        ) from None
    number = 0
    for record_batch in parquet.iter_batches(batch_size=2000):
        for record in record_batch.to_pylist():
            number += 1
            reader = RecordReader(record, file=label, line=number)
            prompt = _nested(record, "prompt.0.content")
            if not isinstance(prompt, str) or not prompt.strip():
                raise reader.error("prompt[0].content", "missing or not a string")
            target = _nested(record, "reward_model.ground_truth.target")
            if isinstance(target, str):
                target = [target]
            if not isinstance(target, list) or not target:
                raise reader.error("reward_model.ground_truth.target", "missing or not a list of strings")
            source = record.get("data_source") or ""
            index = _nested(record, "extra_info.index")
            if index is None:
                raise reader.error("extra_info.index", "missing")
            match = _SEARCH_R1_QUESTION.search(prompt)
            text = match.group(1) if match else prompt.strip()
            metadata = {"data_source": source, "prompt": prompt, "extra_info": record.get("extra_info") or {}}
            yield (
                number,
                f"{source}_{index}" if source else str(index),
                text,
                [str(t) for t in target],
                source,
                metadata,
            )


def _insert_questions(dataset: Dataset, rows: Iterator[QuestionRow], label: str) -> int:
    seen: set[str] = set()

    def checked() -> Iterator[QuestionRow]:
        for row in rows:
            if row[1] in seen:
                raise DataImportError(file=label, line=row[0], field="id", message=f"duplicate id {row[1]!r}")
            seen.add(row[1])
            yield row

    if on_postgresql():
        return copy_rows(
            Question,
            ["dataset", "external_id", "text", "golden_answers", "data_source", "metadata"],
            (
                (dataset.pk, ext, text, json.dumps(golds), source, json.dumps(meta))
                for _, ext, text, golds, source, meta in checked()
            ),
        )
    count = 0
    for batch in batched(checked()):
        Question.objects.bulk_create(
            Question(
                dataset=dataset,
                external_id=ext,
                text=text,
                golden_answers=golds,
                data_source=src,
                metadata=meta,
            )
            for _, ext, text, golds, src, meta in batch
        )
        count += len(batch)
    return count


@transaction.atomic
def dataset_import(
    *, name: str, path: str | Path, file_format: str = "flashrag", display_name: str | None = None
) -> Dataset:
    """Import questions as a new dataset. ``file_format``: ``flashrag`` (JSONL) or ``search_r1`` (parquet)."""
    path = Path(path)
    label = display_name or str(path)
    if Dataset.objects.filter(name=name).exists():
        raise DataImportError(file=label, line=None, field="name", message=f"a dataset named {name!r} exists")
    readers = {"flashrag": _flashrag_rows, "search_r1": _search_r1_rows}
    if file_format not in readers:
        raise DataImportError(
            file=label, line=None, field="format", message=f"unknown dataset format {file_format!r}"
        )
    dataset = Dataset.objects.create(name=name, source=str(path))
    dataset.question_count = _insert_questions(dataset, readers[file_format](path, label), label)
    dataset.save(update_fields=["question_count"])
    return dataset
