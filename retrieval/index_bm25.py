"""BM25 with bm25s (Lucene's scoring, English stop words, no stemmer so nothing beyond bm25s is needed)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

STOPWORDS = "en"


def _bm25s() -> Any:
    import bm25s

    return bm25s


def build(contents: Iterable[str], *, k1: float = 1.5, b: float = 0.75) -> tuple[Any, dict[str, Any]]:
    bm25s = _bm25s()
    tokens = bm25s.tokenize(list(contents), stopwords=STOPWORDS, show_progress=False)
    retriever = bm25s.BM25(k1=k1, b=b)
    retriever.index(tokens, show_progress=False)
    return retriever, {"k1": k1, "b": b, "stopwords": STOPWORDS, "method": retriever.method}


def search(
    retriever: Any, queries: Sequence[str], topk: int, n_passages: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """Scores and rows, best first; a row of -1 marks a passage sharing no word with the query (score 0), which
    would otherwise be an arbitrary filler (Pyserini, Search-R1's BM25 backend, returns only matches too)."""
    bm25s = _bm25s()
    k = min(topk, n_passages)
    tokens = bm25s.tokenize(list(queries), stopwords=STOPWORDS, return_ids=False, show_progress=False)
    rows, scores = retriever.retrieve(tokens, k=k, show_progress=False, n_threads=0)
    rows = np.asarray(rows, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float32)
    rows[scores <= 0] = -1
    return scores, rows


def save(retriever: Any, folder: Path) -> None:
    retriever.save(str(folder), show_progress=False)


def load(folder: Path, *, mmap: bool = False) -> Any:
    return _bm25s().BM25.load(str(folder), mmap=mmap, show_progress=False)
