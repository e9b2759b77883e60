"""Adapters for aggregate metrics (HiPRAG ``analysis.get_scores``)."""

from __future__ import annotations

from typing import Any

from scoring.aggregates import get_scores_reference
from scoring.conformance import Adapter


def _get_scores(record_input: dict[str, Any]) -> list[str]:
    # The reference reads a JSONL file and prints; the vector holds the rows and the printed lines.
    return get_scores_reference(record_input["rows"])


ADAPTERS: dict[str, Adapter] = {"hiprag.analysis.get_scores": _get_scores}
