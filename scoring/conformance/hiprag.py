"""Adapters for hiprag_format.jsonl and hiprag_reward.jsonl (REFERENCE.md §b HiPRAG).

The judge-flow records (``test_oversearch_async``, ``test_undersearch_async``, ``compute_score_em``,
``RewardManager.__call__``) ran the released async code against a fake OpenAI client whose replies are given in
call order (``null`` = the call raised) and a fake actor whose regenerated answers are given by query. Here the same
outcomes come from pure functions: the judge messages the released code would send
(:func:`~scoring.rewards.hiprag.hiprag_reference_step_checks`), the replies parsed as it parsed them, and the reward
from those flags. ``hiprag.analysis.get_scores`` belongs to the aggregates adapters.
"""

from __future__ import annotations

import struct
from typing import Any

from scoring.conformance import Adapter
from scoring.formats.hiprag_checkers import (
    check_format_optimized_reference,
    check_format_regex_reference,
    steps_reference,
)
from scoring.judging.hiprag import (
    AGENT_PROMPT_V2_SHORT,
    NON_SEARCH_STEP_VERIFY_PROMPT_V1,
    REFERENCE_JUDGE_MODEL,
    SEARCH_STEP_VERIFY_PROMPT_V1,
    initial_prompt,
    over_search_flag_reference,
    over_search_message_reference,
    regeneration_queries,
    under_search_flag_reference,
    under_search_message,
)
from scoring.rewards.hiprag import (
    hiprag_reference_step_checks,
    hiprag_reward_reference,
    reference_flags_from_replies,
    search_r1_format_reference,
)

# The fake actor of the RewardManager record answers queries it was not given with this text (the record's note).
_FAKE_ACTOR_UNKNOWN = "I do not know."


def _float32(value: float) -> float:
    """The value as the float32 reward tensor stores it, read back as a Python float."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _steps(record: dict[str, Any]) -> list[list[Any]]:
    contents, starts = steps_reference(record["full_response"])
    return [contents, starts]


def _search_r1_format(trailing_text_check: bool) -> Adapter:
    def adapter(record: dict[str, Any]) -> float:
        return search_r1_format_reference(
            record["model_response"],
            record["ground_truth_answer"],
            record["lambda_f"],
            trailing_text_check=trailing_text_check,
        )

    return adapter


def _judged_reward(
    solution_str: str, target: Any, sfs: float, regenerated: dict[str, str], replies: list[str | None]
) -> tuple[float, list[str]]:
    checks = hiprag_reference_step_checks(solution_str, target, regenerated, structure_format_score=sfs)
    flags = reference_flags_from_replies(checks, replies)
    reward = hiprag_reward_reference(solution_str, target, flags, structure_format_score=sfs)
    return reward, [check.judge_message for check in checks if check.judge_message is not None]


def _compute_score_em(record: dict[str, Any]) -> dict[str, Any]:
    reward, messages = _judged_reward(
        record["solution_str"],
        record["ground_truth"]["target"],
        record["structure_format_score"],
        record["all_search_query_dict"],
        record["judge_replies_in_call_order"],
    )
    calls = [{"model": REFERENCE_JUDGE_MODEL, "user_content": message} for message in messages]
    return {"reward": reward, "judge_calls": calls}


def _reward_manager(record: dict[str, Any]) -> dict[str, Any]:
    # Character-level tokenizer: one token per character, so the last valid response token is at len - 1.
    sequence = record["prompt_text"] + record["response_text"]
    queries = regeneration_queries(sequence)
    given = record["regenerated_no_retrieval_answers"]
    regenerated = {query: given.get(query, _FAKE_ACTOR_UNKNOWN) for query in queries}
    reward, messages = _judged_reward(
        sequence,
        record["ground_truth"]["target"],
        record["structure_format_score"],
        regenerated,
        record["judge_replies_in_call_order"],
    )
    length = len(record["response_text"])
    stored = _float32(reward)
    return {
        "reward_at_last_valid_token": stored,
        "nonzero_positions": {str(length - 1): stored} if stored != 0 else {},
        "valid_response_length": length,
        "regenerated_queries_sorted": queries,
        "judge_calls": messages,
    }


def _oversearch(record: dict[str, Any]) -> dict[str, Any]:
    message = over_search_message_reference(record["step_content"], record["all_search_query_dict"] or {})
    return {
        "flag": False if message is None else over_search_flag_reference(record["judge_reply"]),
        "judge_user_content": message,
        "judge_model": REFERENCE_JUDGE_MODEL,
    }


def _undersearch(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "flag": under_search_flag_reference(record["judge_reply"]),
        "judge_user_content": under_search_message(record["step_content"]),
        "judge_model": REFERENCE_JUDGE_MODEL,
    }


ADAPTERS: dict[str, Adapter] = {
    "hiprag.qa_em_format.check_full_response_format_optimized": lambda r: check_format_optimized_reference(
        r["full_response"], reject_trailing_text=True
    ),
    "hiprag.reward_py.check_full_response_format_optimized": lambda r: check_format_optimized_reference(
        r["full_response"], reject_trailing_text=False
    ),
    "hiprag.check_full_response_format": lambda r: check_format_regex_reference(r["full_response"]),
    "hiprag.get_steps_from_full_response": _steps,
    "hiprag.qa_em_format.search_r1_format": _search_r1_format(trailing_text_check=True),
    "hiprag.reward_py.search_r1_format": _search_r1_format(trailing_text_check=False),
    "hiprag.prompt.AGENT_PROMPT_V2_SHORT": lambda r: AGENT_PROMPT_V2_SHORT,
    "hiprag.prompt.SEARCH_STEP_VERIFY_PROMPT_V1": lambda r: SEARCH_STEP_VERIFY_PROMPT_V1,
    "hiprag.prompt.NON_SEARCH_STEP_VERIFY_PROMPT_V1": lambda r: NON_SEARCH_STEP_VERIFY_PROMPT_V1,
    "hiprag.inference.initial_prompt": lambda r: initial_prompt(r["question"]),
    "hiprag.qa_em_format.compute_score_em": _compute_score_em,
    "hiprag.main_ppo_format.RewardManager.__call__": _reward_manager,
    "hiprag.qa_em_format.test_oversearch_async": _oversearch,
    "hiprag.qa_em_format.test_undersearch_async": _undersearch,
}

# The RewardManager writes into a float32 tensor; the value is rounded to float32 above, and compared loosely too.
APPROXIMATE: frozenset[str] = frozenset({"hiprag.main_ppo_format.RewardManager.__call__"})
