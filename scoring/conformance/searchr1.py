"""Adapters for searchr1_reward.jsonl (Search-R1 a14dc3a4 ``qa_em.py``, ``qa_em_format.py``, ``make_prefix``).

Search-R1's reward functions return ints in some branches (``return 0``) and floats in others; the harness compares
numbers numerically, so our floats stand for both. ``ground_truth`` is the parquet row's ``{"target": [...]}``.
"""

from __future__ import annotations

from typing import Any

from scoring.conformance import Adapter
from scoring.formats.searchr1 import extract_solution_reference, is_valid_sequence_reference, make_prefix
from scoring.rewards.searchr1 import (
    ground_truth_target,
    searchr1_em_reward_reference,
    searchr1_format_reward_reference,
    searchr1_subem_reward_reference,
)


def _format_em(record: dict[str, Any]) -> float:
    return searchr1_format_reward_reference(
        record["solution_str"],
        ground_truth_target(record["ground_truth"]),
        structure_format_score=record.get("structure_format_score", 0),
        final_format_score=record.get("final_format_score", 0),
        retrieval_score=record.get("retrieval_score", 0),
        format_score=record.get("format_score", 0),
        score=record.get("score", 1.0),
    )


def _em(record: dict[str, Any]) -> float:
    return searchr1_em_reward_reference(
        record["solution_str"],
        ground_truth_target(record["ground_truth"]),
        format_score=record.get("format_score", 0.0),
        score=record.get("score", 1.0),
    )


def _subem(record: dict[str, Any]) -> float:
    return searchr1_subem_reward_reference(
        record["solution_str"],
        ground_truth_target(record["ground_truth"]),
        format_score=record.get("format_score", 0.0),
        score=record.get("score", 1.0),
    )


def _is_valid_sequence(record: dict[str, Any]) -> list[object]:
    return list(is_valid_sequence_reference(record["text"]))


def _extract_solution(record: dict[str, Any]) -> str | None:
    return extract_solution_reference(record["solution_str"])


def _make_prefix(record: dict[str, Any]) -> str:
    return make_prefix(record["question"], record.get("template_type", "base"))


ADAPTERS: dict[str, Adapter] = {
    "searchr1.qa_em_format.compute_score_em": _format_em,
    "searchr1.qa_em.compute_score_em": _em,
    "searchr1.qa_em.compute_score_subem": _subem,
    "searchr1.qa_em.extract_solution": _extract_solution,
    "searchr1.qa_em_format.is_valid_sequence": _is_valid_sequence,
    "searchr1.prompt.make_prefix": _make_prefix,
}
