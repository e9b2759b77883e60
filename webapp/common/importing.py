"""Shared machinery of the streamed, bulk-inserted, all-or-nothing imports.

Every import reads its file line by line, checks each record, inserts in batches inside one transaction, and on a bad
record raises :class:`DataImportError` naming the file, the line and the field, which rolls the whole import back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, models

T = TypeVar("T")


class DataImportError(Exception):
    """A record that cannot be imported. ``line`` is 1-based (a parquet row number counts from 1 too)."""

    def __init__(self, *, file: str | Path, line: int | None, field: str | None, message: str) -> None:
        self.file = str(file)
        self.line = line
        self.field = field
        self.message = message
        where = self.file + (f", line {line}" if line is not None else "")
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{where}: {what}{message}")


def iter_jsonl(path: str | Path, *, name: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line; a line that is not a JSON object is an error."""
    label = name or str(path)
    with open(path, "rb") as handle:  # decoded per line, so a bad byte is reported with its line number
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataImportError(
                    file=label,
                    line=number,
                    field=None,
                    message=f"not UTF-8 text: byte {exc.start} ({exc.reason})",
                ) from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except RecursionError:
                raise DataImportError(
                    file=label, line=number, field=None, message="invalid JSON: nested too deep"
                ) from None
            except ValueError as exc:  # JSONDecodeError, or an integer beyond Python's digit limit
                raise DataImportError(
                    file=label, line=number, field=None, message=f"invalid JSON: {exc}"
                ) from None
            if not isinstance(record, dict):
                raise DataImportError(file=label, line=number, field=None, message="expected a JSON object")
            yield number, record


class RecordReader:
    """Typed access to one record's fields that raises a :class:`DataImportError` naming the field."""

    def __init__(self, record: dict[str, Any], *, file: str, line: int) -> None:
        self.record = record
        self.file = file
        self.line = line

    def error(self, field: str | None, message: str) -> DataImportError:
        return DataImportError(file=self.file, line=self.line, field=field, message=message)

    def has(self, field: str) -> bool:
        return self.record.get(field) is not None

    def text(self, field: str, *, required: bool = True, allow_empty: bool = False) -> str | None:
        value = self.record.get(field)
        if value is None:
            if required:
                raise self.error(field, "missing")
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)  # FlashRAG ids are sometimes numbers
        if not isinstance(value, str):
            raise self.error(field, f"expected a string, got {type(value).__name__}")
        if not value.strip() and not allow_empty:
            raise self.error(field, "empty")
        return value

    def text_list(self, field: str) -> list[str]:
        value = self.record.get(field)
        if value is None:
            raise self.error(field, "missing")
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
            raise self.error(field, "expected a list of strings")
        return [str(v) for v in value]

    def integer(self, field: str, *, required: bool = True) -> int | None:
        value = self.record.get(field)
        if value is None:
            if required:
                raise self.error(field, "missing")
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(field, f"expected an integer, got {type(value).__name__}")
        if not -(2**63) <= value < 2**63:  # what a database integer column holds
            raise self.error(field, "expected an integer within ±2^63")
        return value

    def mapping(self, field: str) -> dict[str, Any]:
        value = self.record.get(field)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(field, "expected an object")
        return value


def batched(items: Iterable[T], size: int | None = None) -> Iterator[list[T]]:
    iterator = iter(items)
    n = size or settings.IMPORT_BATCH_SIZE
    while batch := list(islice(iterator, n)):
        yield batch


def on_postgresql() -> bool:
    return connection.vendor == "postgresql"


def copy_rows(model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Insert rows with PostgreSQL's COPY (psycopg 3). JSON columns take ``json.dumps`` strings. Returns the count.

    About five times faster than ``bulk_create`` for the corpus; the caller is inside the import's transaction.
    """
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(model._meta.get_field(c).column) for c in columns)
    count = 0
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            count += 1
    return count
