"""Adapters for aggregate metrics (HiPRAG analysis.get_scores)."""

from __future__ import annotations

from scoring.conformance import Adapter

ADAPTERS: dict[str, Adapter] = {}
