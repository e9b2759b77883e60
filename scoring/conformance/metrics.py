"""Adapters for normalize.jsonl and answer_metrics.jsonl (REFERENCE.md §a).

Only the result types are translated here: Search-R1's ``em_check``/``subem_check`` return the ints 1/0, FlashRAG's
``calculate_em``/``calculate_sub_em`` return the floats 1.0/0.0 and HiPRAG's ``cover_exact_match`` returns a bool.
"""

from __future__ import annotations

from typing import Any

from scoring.conformance import Adapter
from scoring.metrics import (
    cover_exact_match,
    exact_match,
    flashrag_acc,
    normalize_answer,
    normalize_string,
    query_f1,
    substring_match,
    token_f1,
)


def _normalize_answer(record: dict[str, Any]) -> str:
    return normalize_answer(record["s"])


def _normalize_string(record: dict[str, Any]) -> str:
    return normalize_string(record["s"])


def _em_check(record: dict[str, Any]) -> int:
    return int(exact_match(record["prediction"], record["golden_answers"]))


def _subem_check(record: dict[str, Any]) -> int:
    return int(substring_match(record["prediction"], record["golden_answers"]))


def _calculate_em(record: dict[str, Any]) -> float:
    return float(exact_match(record["prediction"], record["golden_answers"]))


def _calculate_sub_em(record: dict[str, Any]) -> float:
    return float(flashrag_acc(record["prediction"], record["golden_answers"]))


def _token_level_scores(record: dict[str, Any]) -> dict[str, float]:
    scores = token_f1(record["prediction"], record["ground_truths"])
    return {"f1": scores.f1, "precision": scores.precision, "recall": scores.recall}


def _query_f1_score(record: dict[str, Any]) -> float:
    return query_f1(record["prediction"], record["golden_answers"])


def _cover_exact_match(record: dict[str, Any]) -> bool:
    return cover_exact_match(record["pred"], record["gold"])


ADAPTERS: dict[str, Adapter] = {
    "searchr1.qa_em.normalize_answer": _normalize_answer,
    "flashrag.evaluator.utils.normalize_answer": _normalize_answer,
    "hiprag.qa_em_format.normalize_string": _normalize_string,
    "searchr1.qa_em.em_check": _em_check,
    "searchr1.qa_em.subem_check": _subem_check,
    "flashrag.ExactMatch.calculate_em": _calculate_em,
    "flashrag.Sub_ExactMatch.calculate_sub_em": _calculate_sub_em,
    "flashrag.F1_Score.token_level_scores": _token_level_scores,
    "autosearch.qa_f1.query_f1_score": _query_f1_score,
    "hiprag.qa_em_format.cover_exact_match": _cover_exact_match,
}
