"""What every search engine offers the agent: a batch of queries in, the top-k documents per query out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from scoring.observations import RetrievedDocument

__all__ = ["RetrievedDocument", "Searcher"]


class Searcher(Protocol):
    """A local index, a hybrid of indexes, or a remote ``/retrieve`` server (Search-R1's request and response)."""

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        """For each query, its ``topk`` best documents, best first; ``contents`` is FlashRAG's "Title\\ntext"."""
        ...
