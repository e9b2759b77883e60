"""FlashRAG corpora: JSONL rows ``{"id": str, "contents": "Title\\ntext"}``, read as a stream.

A built index does not copy the passages: it keeps the corpus path, its sha256 and the byte offset of every row
(:class:`CorpusFile`), so a 21M-passage wiki-18 corpus costs 8 bytes per passage in memory and a hit's
``contents`` is one ``pread`` away.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from scoring.observations import DOC_CONTENTS_FIELD, DOC_ID_FIELD

Progress = Callable[[int, int], None]
"""A progress callback ``(done, total)``; ``total`` is 0 while it is unknown."""

_CHUNK = 1 << 20


class CorpusError(ValueError):
    """A corpus row that is not FlashRAG JSONL; the message names the file, the 1-based line and the field."""


@dataclass(frozen=True, slots=True)
class Passage:
    id: str
    contents: str

    @property
    def title(self) -> str:
        return self.contents.partition("\n")[0]

    @property
    def text(self) -> str:
        return self.contents.partition("\n")[2]


def parse_row(line: bytes | str, *, path: Path | str, line_number: int) -> Passage:
    """One JSONL row as a :class:`Passage`. An integer id is accepted (some FlashRAG dumps have them) and kept as
    its decimal string, since ``/retrieve`` clients compare ids as strings."""
    where = f"{path}:{line_number}"
    try:
        row: Any = json.loads(line)
    except json.JSONDecodeError as error:
        raise CorpusError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(row, dict):
        raise CorpusError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for field in (DOC_ID_FIELD, DOC_CONTENTS_FIELD):
        if field not in row:
            raise CorpusError(f"{where}: field {field!r} is missing")
    doc_id = row[DOC_ID_FIELD]
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
        raise CorpusError(f"{where}: field {DOC_ID_FIELD!r} must be a string, got {type(doc_id).__name__}")
    contents = row[DOC_CONTENTS_FIELD]
    if not isinstance(contents, str):
        raise CorpusError(
            f"{where}: field {DOC_CONTENTS_FIELD!r} must be a string, got {type(contents).__name__}"
        )
    return Passage(str(doc_id), contents)


def _rows(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line number, byte offset, line) for every non-blank line."""
    offset = 0
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, offset, line
            offset += len(line)


def read_corpus(path: Path | str) -> Iterator[Passage]:
    """Stream the passages of a FlashRAG JSONL file in file order (blank lines are skipped)."""
    path = Path(path)
    for number, _, line in _rows(path):
        yield parse_row(line, path=path, line_number=number)


def corpus_checksum(path: Path | str) -> str:
    """The sha256 of the file's bytes, hex."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class CorpusFile:
    """Random access to a corpus file by row number, through the byte offsets of its rows.

    Reads use ``os.pread`` on one descriptor, so concurrent server threads need no lock.
    """

    def __init__(self, path: Path | str, offsets: npt.NDArray[np.int64], sha256: str) -> None:
        self.path = Path(path)
        self.offsets = offsets
        self.sha256 = sha256
        self._fd = os.open(self.path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size

    @classmethod
    def scan(cls, path: Path | str, progress: Progress | None = None) -> CorpusFile:
        """Read the whole file once: validate every row, record offsets, hash the bytes."""
        path = Path(path)
        total = path.stat().st_size
        digest = hashlib.sha256()
        offsets: list[int] = []
        seen = 0
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                digest.update(line)
                if line.strip():
                    parse_row(line, path=path, line_number=number)
                    offsets.append(seen)
                seen += len(line)
                if progress is not None and number % 10_000 == 0:
                    progress(seen, total)
        if progress is not None:
            progress(total, total)
        return cls(path, np.asarray(offsets, dtype=np.int64), digest.hexdigest())

    def __len__(self) -> int:
        return int(self.offsets.shape[0])

    def __getitem__(self, row: int) -> Passage:
        start = int(self.offsets[row])
        end = int(self.offsets[row + 1]) if row + 1 < len(self) else self._size
        line = os.pread(self._fd, end - start, start)
        return parse_row(line, path=self.path, line_number=row + 1)

    def passages(self, rows: Sequence[int]) -> list[Passage]:
        return [self[row] for row in rows]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self.close()

    def iter_contents(self) -> Iterator[str]:
        for passage in read_corpus(self.path):
            yield passage.contents
