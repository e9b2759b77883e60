from __future__ import annotations

from collections.abc import Sequence

import pytest

from retrieval.hybrid import HybridSearcher, reciprocal_rank_fusion
from scoring.observations import RetrievedDocument


def docs(*ids: str) -> list[RetrievedDocument]:
    return [RetrievedDocument(i, f"Title {i}\ntext", 1.0) for i in ids]


@pytest.mark.parametrize(
    ("rankings", "expected"),
    [
        # One ranking passes through unchanged.
        ([docs("a", "b", "c")], ["a", "b", "c"]),
        # A document both rankings hold beats documents only one holds, even at rank 1.
        ([docs("a", "b"), docs("c", "b")], ["b", "a", "c"]),
        # Equal fused scores keep the order of first appearance.
        ([docs("a", "b"), docs("b", "a")], ["a", "b"]),
        # An empty ranking (BM25 with no matching word) adds nothing.
        ([docs("a"), []], ["a"]),
    ],
)
def test_it_fuses_by_reciprocal_rank(rankings: list[list[RetrievedDocument]], expected: list[str]) -> None:
    assert [d.id for d in reciprocal_rank_fusion(rankings)] == expected


def test_it_scores_with_the_rrf_sum() -> None:
    [first, *_] = reciprocal_rank_fusion([docs("a", "b"), docs("b", "a")], k=60)
    assert first.score == pytest.approx(1 / 61 + 1 / 62)


class Fixed:
    def __init__(self, ranking: list[RetrievedDocument]) -> None:
        self.ranking = ranking
        self.asked: list[int] = []

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        self.asked.append(topk)
        return [self.ranking[:topk] for _ in queries]


def test_it_asks_each_searcher_deeper_than_topk() -> None:
    dense, sparse = Fixed(docs("a", "b", "c", "d")), Fixed(docs("d", "c"))
    hybrid = HybridSearcher([dense, sparse], depth=4)
    [[first, second]] = hybrid.search(["q"], 2)
    assert (first.id, second.id) == ("d", "c")
    assert dense.asked == sparse.asked == [4]
