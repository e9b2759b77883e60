"""Adapters for the tiresrag vectors."""

from __future__ import annotations

from scoring.conformance import Adapter

ADAPTERS: dict[str, Adapter] = {}
