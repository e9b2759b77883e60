"""Adapters for autosearch_reward.jsonl (REFERENCE.md §b AutoSearch).

``RewardManager.__call__`` ran in float32 (torch), so it is compared at a relative tolerance of 1e-6; the rest is
exact. The record whose prompt has no ``<answer>`` example expects ``AttributeError``: our reference variant raises
it on purpose (``em_check(None)`` in the released code), see
:func:`scoring.rewards.autosearch_reference.compute_score_em_reference`.
"""

from __future__ import annotations

from typing import Any

from scoring.conformance import Adapter
from scoring.formats.autosearch import (
    extract_original_question_reference,
    is_repeat_part,
    is_valid_answer_part,
    is_valid_search_part,
)
from scoring.judging.autosearch import extract_intermediate_answer
from scoring.rewards.autosearch_reference import (
    autosearch_reward_reference,
    compute_score_em_reference,
    reference_turns,
)

_PREFIX = "autosearch."
_REWARD_MANAGER = "autosearch.main_ppo_format_turn_new78.RewardManager.__call__"


def _is_valid_search_part(record: dict[str, Any]) -> bool:
    return is_valid_search_part(record["part_text"])


def _is_valid_answer_part(record: dict[str, Any]) -> bool:
    return is_valid_answer_part(record["part_text"])


def _is_repeat_part(record: dict[str, Any]) -> bool:
    return is_repeat_part(record["current_info"], record["history_infos"])


def _compute_score_em(record: dict[str, Any]) -> dict[str, Any]:
    scores = compute_score_em_reference(
        record["solution_str"],
        record["ground_truth"]["target"],
        record["new_parts"],
        structure_format_score=record["structure_format_score"],
        final_format_score=record["final_format_score"],
    )
    return {"answer_score": scores.answer_score, "step_scores": list(scores.step_scores)}


def _reward_manager(record: dict[str, Any]) -> dict[str, Any]:
    result = autosearch_reward_reference(
        record["prompt_text"],
        reference_turns(record["turns"]),
        record["ground_truth"]["target"],
        record["intermediate_raw_answers"],
        structure_format_score=record["structure_format_score"],
        final_format_score=record["final_format_score"],
        process_reward_ratio=record["process_reward_ratio"],
        is_validation=record["is_validation"],
    )
    return {
        "per_turn_reward_f32": list(result.per_turn_rewards),
        "reward_sum_f32": result.reward_sum,
        "nonzero_outside_turn_ends": {str(p): v for p, v in result.outside_turn_ends.items()},
        "reward_em": result.reward_em,
        "reward_f1": result.reward_f1,
        "early_correct": result.early_correct,
        "early_correct_ratio": result.early_correct_ratio,
        "intermediate_prompts": list(result.intermediate_prompts),
    }


def _extract_final_answer(record: dict[str, Any]) -> str:
    return extract_intermediate_answer(record["text"])


def _extract_original_question(record: dict[str, Any]) -> str:
    return extract_original_question_reference(record["prompt_text"])


ADAPTERS: dict[str, Adapter] = {
    _PREFIX + "qa_em_format_turn62.is_valid_search_part": _is_valid_search_part,
    _PREFIX + "qa_em_format_turn62.is_valid_answer_part": _is_valid_answer_part,
    _PREFIX + "qa_em_format_turn62.is_repeat_part": _is_repeat_part,
    _PREFIX + "qa_em_format_turn62.compute_score_em": _compute_score_em,
    _REWARD_MANAGER: _reward_manager,
    _PREFIX + "RewardManager._extract_final_answer": _extract_final_answer,
    _PREFIX + "RewardManager._extract_original_question": _extract_original_question,
}

APPROXIMATE: frozenset[str] = frozenset({_REWARD_MANAGER})
