"""Adapters for searchp1_paper.jsonl: Search-P1's equations as the team reads the paper (no code was released).

Search-P1 has no reference variant: these adapters call the paper-mode functions of
:mod:`scoring.rewards.searchp1` directly. Every value is plain float arithmetic, compared exactly.
"""

from __future__ import annotations

from typing import Any

from scoring.conformance import Adapter
from scoring.formats.searchp1 import SearchP1FormatFacts
from scoring.rewards.searchp1 import (
    INVALID_TRAJECTORY_NOTE,
    SearchP1Evaluation,
    format_reward,
    reference_alignment_score,
    reference_alignment_score_alg3,
    searchp1_reward_from_parts,
    self_consistency_score,
    self_consistency_score_alg3,
    soft_outcome_reward,
)

_PREFIX = "paper.searchp1."


def _facts(record: dict[str, Any]) -> SearchP1FormatFacts:
    return SearchP1FormatFacts(
        valid_format=record["valid_format"],
        has_answer=record["has_answer"],
        has_tool_call=record["has_tool_call"],
        has_tool_response=record["has_tool_response"],
    )


def _s_self_eq6(record: dict[str, Any]) -> float:
    return self_consistency_score(
        record["r_planner"], record["n_exec_self"], record["n_plan"], record["n_actions"]
    )


def _s_ref_eq7(record: dict[str, Any]) -> float:
    return reference_alignment_score(record["n_covered"], record["n_ref"], record["n_actions"])


def _s_self_alg3(record: dict[str, Any]) -> float:
    return self_consistency_score_alg3(
        record["planner_score"], record["effective_steps_self"], record["model_plan_steps"]
    )


def _s_ref_alg3(record: dict[str, Any]) -> float:
    return reference_alignment_score_alg3(record["effective_steps_ref"], record["n_ref_steps"])


def _r_outcome_eq8(record: dict[str, Any]) -> float:
    return soft_outcome_reward(record["correct"], record["r_acc"], record["r_reason"])


def _r_format_alg3(record: dict[str, Any]) -> float | None:
    return format_reward(_facts(record))


def _r_total_eq4(record: dict[str, Any]) -> dict[str, Any]:
    evaluation = SearchP1Evaluation(
        planner_score=record["planner_score"],
        model_plan_steps=record["model_plan_steps"],
        effective_steps_self=record["effective_steps_self"],
        effective_steps_ref=record["effective_steps_ref"],
        outcome_accuracy_score=record["r_acc"],
        outcome_reasoning_score=record["r_reason"],
    )
    reward = searchp1_reward_from_parts(
        facts=_facts(record),
        evaluation=evaluation,
        n_actions=record["n_actions"],
        n_ref_steps=record["n_ref_steps"],
        correct=record["correct"],
        variant=record.get("variant", "main"),
    )
    output: dict[str, Any] = {**reward.components, "R_total": reward.total}
    if format_reward(_facts(record)) is None:
        output["note"] = INVALID_TRAJECTORY_NOTE  # the vectors mark the Algorithm 3 line 7 early return
    return output


ADAPTERS: dict[str, Adapter] = {
    _PREFIX + "S_self_eq6": _s_self_eq6,
    _PREFIX + "S_ref_eq7": _s_ref_eq7,
    _PREFIX + "S_self_alg3": _s_self_alg3,
    _PREFIX + "S_ref_alg3": _s_ref_alg3,
    _PREFIX + "R_outcome_eq8": _r_outcome_eq8,
    _PREFIX + "R_format_alg3": _r_format_alg3,
    _PREFIX + "R_total_eq4": _r_total_eq4,
}
