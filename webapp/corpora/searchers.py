"""The searchers of this process (web or worker): each ready index loaded once, behind a BatchingSearcher.

Loading an index costs the encoder model and the FAISS file (seconds, hundreds of MB), so a process keeps it; a
folder rebuilt since it was loaded (its metadata.json changed) is loaded again. Concurrent ``/retrieve`` requests
served by the threads of one process are coalesced into one encode + search by the BatchingSearcher.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from retrieval.searcher import Searcher
from scoring.observations import format_passage
from webapp.corpora.models import Index, Passage
from webapp.corpora.selectors import passage_by_external_ids

_loaded: dict[str, tuple[int, Searcher]] = {}
_loading = threading.Lock()


class IndexNotReady(Exception):
    """The index cannot answer queries (not built, failed, or its folder is gone); the message says which."""


class NotFusable(Exception):
    """Two indexes that a hybrid search cannot combine; the message says why."""


def index_searcher(index: Index) -> Searcher:
    from retrieval.batching import BatchingSearcher
    from retrieval.index import METADATA_FILE, load_index

    if index.status != Index.Status.READY or not index.path:
        raise IndexNotReady(f"index {index} is {index.status}, not ready")
    folder = str(Path(index.path).resolve())
    try:
        stamp = (Path(folder) / METADATA_FILE).stat().st_mtime_ns
    except FileNotFoundError:
        raise IndexNotReady(f"index {index} has no folder at {folder}; rebuild it") from None
    with _loading:
        found = _loaded.get(folder)
        if found is None or found[0] != stamp:
            # A replaced searcher is not closed: a request thread may still hold it and would wait forever on a
            # closed batcher. Its idle worker thread is the price of a rebuild.
            loaded = load_index(
                folder, faiss_threads=settings.RETRIEVAL_FAISS_THREADS, use_gpu=settings.RETRIEVAL_USE_GPU
            )
            found = (stamp, BatchingSearcher(loaded))
            _loaded[folder] = found
        return found[1]


def check_fusable(first: Index, second: Index) -> None:
    """A hybrid fuses rankings by passage id, so both indexes must have been built over the same corpus bytes."""
    if first.pk == second.pk:
        raise NotFusable("pick a different index to fuse with")
    if first.corpus_id != second.corpus_id:
        raise NotFusable(f"{second} indexes another corpus than {first}")
    sha_first, sha_second = first.metadata.get("corpus_sha256"), second.metadata.get("corpus_sha256")
    if not sha_first or sha_first != sha_second:
        raise NotFusable(
            f"{first} and {second} were built over different versions of the corpus file "
            f"(sha256 {str(sha_first)[:12]}… vs {str(sha_second)[:12]}…); rebuild one of them"
        )


def hybrid_searcher(first: Index, second: Index) -> Searcher:
    """Reciprocal-rank fusion of two indexes of one corpus (typically dense + BM25)."""
    from retrieval.hybrid import HybridSearcher

    check_fusable(first, second)
    return HybridSearcher([index_searcher(first), index_searcher(second)])


def forget_searchers() -> None:
    """Drop every loaded searcher (tests; a process that must release memory)."""
    with _loading:
        _loaded.clear()


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved passage as the try-a-query page shows it: Search-R1's ``Doc i(Title: …) text`` line."""

    rank: int
    external_id: str
    title: str
    text: str
    score: float
    passage: Passage | None  # the stored row, when the corpus import has it

    @property
    def search_r1_line(self) -> str:
        """Exactly what the agent reads: the same formatting function the rollouts use."""
        return format_passage(self.rank, f"{self.title}\n{self.text}").rstrip("\n")


def index_try_query(
    *, index: Index, query: str, topk: int, fuse_with: Index | None = None
) -> tuple[list[Hit], float]:
    """Search one query on ``index`` (fused with ``fuse_with`` by RRF when given): its hits and the seconds taken."""
    searcher = hybrid_searcher(index, fuse_with) if fuse_with is not None else index_searcher(index)
    started = time.perf_counter()
    documents = searcher.search([query], topk)[0]
    seconds = time.perf_counter() - started
    passages = passage_by_external_ids(corpus=index.corpus, external_ids=[d.id for d in documents])
    hits = []
    for rank, document in enumerate(documents, start=1):
        # scoring.observations.format_passage's split: the first line is the title, shown as Search-R1 shows it.
        title, _, text = document.contents.partition("\n")
        hits.append(Hit(rank, document.id, title, text, document.score, passages.get(document.id)))
    return hits, seconds
