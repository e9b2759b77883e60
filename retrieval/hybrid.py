"""Hybrid retrieval by reciprocal-rank fusion (Cormack et al., 2009): score(d) = Σ_i 1 / (k + rank_i(d))."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.searcher import Searcher
from scoring.observations import RetrievedDocument

RRF_K = 60  # the paper's constant: damps the weight of the very first ranks


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[RetrievedDocument]], *, k: int = RRF_K, topk: int | None = None
) -> list[RetrievedDocument]:
    """Fuse rankings of one query (ranks are 1-based); a document's score becomes its fused score.

    Ties keep the order of first appearance (earlier ranking, then earlier rank), so the result is deterministic.

    >>> a = [RetrievedDocument("1", "A", 9.0), RetrievedDocument("2", "B", 8.0)]
    >>> b = [RetrievedDocument("2", "B", 0.9), RetrievedDocument("3", "C", 0.8)]
    >>> [d.id for d in reciprocal_rank_fusion([a, b])]
    ['2', '1', '3']
    """
    fused: dict[str, float] = {}
    first: dict[str, RetrievedDocument] = {}
    for ranking in rankings:
        for rank, document in enumerate(ranking, start=1):
            fused[document.id] = fused.get(document.id, 0.0) + 1.0 / (k + rank)
            first.setdefault(document.id, document)
    order = sorted(fused, key=lambda doc_id: -fused[doc_id])  # sorted() is stable: ties keep first appearance
    if topk is not None:
        order = order[:topk]
    return [RetrievedDocument(doc_id, first[doc_id].contents, fused[doc_id]) for doc_id in order]


class HybridSearcher:
    """Several searchers over the same corpus (e.g. dense and BM25), fused by RRF.

    Each is asked for ``depth`` documents per query (at least ``topk``) so a document ranked low by one and
    high by the other can still make the fused top-k.
    """

    def __init__(self, searchers: Sequence[Searcher], *, k: int = RRF_K, depth: int = 20) -> None:
        if not searchers:
            raise ValueError("a hybrid needs at least one searcher")
        self.searchers = list(searchers)
        self.k = k
        self.depth = depth

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        depth = max(topk, self.depth)
        per_searcher = [searcher.search(queries, depth) for searcher in self.searchers]
        return [
            reciprocal_rank_fusion([results[q] for results in per_searcher], k=self.k, topk=topk)
            for q in range(len(queries))
        ]
