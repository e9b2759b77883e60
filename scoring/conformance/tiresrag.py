"""Adapters for ``tiresrag_reward.jsonl`` (TIRESRAG-R1 @ a457873: reward server, judge server, OpenRLHF trainer).

Records whose output is ``{"error": …}`` are reproduced by the reference variants raising the same exception type
on purpose (documented where they raise): ``UnboundLocalError`` (judge server not 200), ``KeyError`` (question not
in the dataset), ``ValueError`` (numpy reshape of a batch not divisible by the group size), ``TypeError`` (numpy
reduction over a non-numeric judge value) and ``json.JSONDecodeError`` (malformed sufficiency JSON).
"""

from __future__ import annotations

from typing import Any

from scoring.conformance import Adapter
from scoring.formats.tiresrag import (
    extract_all_answers_reference,
    extract_answer_math_reference,
    is_valid_sequence_reference,
)
from scoring.judging.tiresrag import (
    SAMPLING_PARAMS,
    ParseMissCounter,
    extract_information_and_others_reference,
    extract_question_reference,
    generate_reference,
    get_result_reference,
    remove_think_tags_reference,
)
from scoring.rewards.tiresrag_reference import (
    JudgeServerReply,
    MathRuleProxyReference,
    consistency_penalty_reference,
    cover_exact_match_score_reference,
    difficulty_weight_reference,
    dynamic_weight_reference,
    exact_match_score_reference,
    f1_score_reference,
    normalize_answer_reference,
)
from scoring.rewards.tiresrag_reference_trainer import (
    compute_reward_reference,
    filter_groups_reference,
    process_experiences_reference,
    reward_filter_advantages_reference,
)

_SERVER = "TIRESRAG-R1.reward.answer_reflection_reward."
_JUDGE = "TIRESRAG-R1.reward.sufficient_thinking_reward."
_MAKER = "TIRESRAG-R1.OpenRLHF-RAG.openrlhf.trainer.ppo_utils.experience_maker.NaiveExperienceMaker."
_COMPUTE_REWARD = "TIRESRAG-R1.OpenRLHF-RAG.openrlhf.models.utils.compute_reward"
_COMPOSITE = "TIRESRAG-R1.composite.get_reward+filter+process_experiences"


def _judge_reply(record: dict[str, Any]) -> JudgeServerReply:
    reply = record["suff_server"]
    return JudgeServerReply(reply["status_code"], reply.get("results", []), reply.get("thinking_results", []))


def _get_reward(record: dict[str, Any]) -> dict[str, Any]:
    server = MathRuleProxyReference(record["dataset"])
    result = server.get_reward(
        record["queries"],
        record["group_size"],
        record.get("exit_flags"),
        record["total_training_steps"],
        record["global_step"],
        _judge_reply(record),
    )
    return {"rewards": result.rewards, "sufficiency_request_payload": result.sufficiency_request_payload}


def _get_result(record: dict[str, Any]) -> dict[str, Any]:
    # Each record was produced with the server's global miss counter at 0, as at the start of a request.
    counter = ParseMissCounter()
    value = get_result_reference(record["s"], counter)
    return {"value": value, "parse_misses": counter.misses}


def _generate(record: dict[str, Any]) -> dict[str, Any]:
    response = generate_reference(record["data"], record["suff_llm_outputs"], record["think_llm_outputs"])
    output: dict[str, Any] = {
        "response": {"results": response.results, "thinking_results": response.thinking_results}
    }
    if record.get("return_prompts"):
        output["sufficiency_messages"] = response.sufficiency_prompts
        # The documented contract (../shared/reference/README.md): the thinking judge's rendered *user* prompt per
        # item; its system prompt is fixed and lives in reference/prompts/.
        output["thinking_user_prompts"] = [
            next(m["content"] for m in messages if m["role"] == "user")
            for messages in response.thinking_prompts
        ]
        output["sampling_params"] = dict(SAMPLING_PARAMS)
    return output


def _filter(record: dict[str, Any]) -> dict[str, Any]:
    result = filter_groups_reference(
        record["answer_rewards"],
        record["n_samples_per_prompt"],
        accuracy_lower_bound=record.get("accuracy_lower_bound", 0.1),
        accuracy_upper_bound=record.get("accuracy_upper_bound", 0.9),
    )
    return {"kept_indices": result.kept_indices, "wandb_log": result.wandb_log}


def _composite(record: dict[str, Any]) -> dict[str, Any]:
    result = reward_filter_advantages_reference(
        record["dataset"],
        record["queries"],
        record["group_size"],
        # The rollout always sends exit flags of 0 (REFERENCE.md §2.6); this record leaves them out.
        record.get("exit_flags", [0] * len(record["queries"])),
        record["global_step"],
        record["total_training_steps"],
        _judge_reply(record),
    )
    return {
        "total_reward": result.total_reward,
        "answer_f1": result.answer_f1,
        "difficulty": result.difficulty,
        "penalty": result.penalty,
        "kept_indices": result.kept_indices,
        "advantages_of_kept": result.advantages_of_kept,
    }


ADAPTERS: dict[str, Adapter] = {
    _SERVER + "f1_score": lambda r: list(f1_score_reference(r["prediction"], r["ground_truth"])),
    _SERVER + "cover_exact_match_score_1": lambda r: cover_exact_match_score_reference(
        r["prediction"], r["ground_truth"]
    ),
    _SERVER + "exact_match_score": lambda r: exact_match_score_reference(r["prediction"], r["ground_truth"]),
    _SERVER + "normalize_answer": lambda r: normalize_answer_reference(r["s"]),
    _SERVER + "extract_answer_math": lambda r: extract_answer_math_reference(r["s"]),
    _SERVER + "extract_all_answers": lambda r: extract_all_answers_reference(r["s"]),
    _SERVER + "is_valid_sequence": lambda r: list(is_valid_sequence_reference(r["text"])),
    _SERVER + "get_reward.inline_dynamic_weight": lambda r: dynamic_weight_reference(
        r["global_step"], r["total_training_steps"]
    ),
    _SERVER + "difficulty_weight": lambda r: difficulty_weight_reference(r["rho_q"]),
    _SERVER + "compute_consistency_penalty": lambda r: consistency_penalty_reference(
        r["answer_reward"],
        r["thinking_reward"],
        r["sufficient_reward"],
        r["global_step"],
        r["total_training_steps"],
        lambda_penalty=r.get("lambda_penalty", 0.1),
        group_size=r["group_size"],
    ),
    _SERVER + "MathRuleProxy.get_reward": _get_reward,
    _JUDGE + "get_result": _get_result,
    _JUDGE + "remove_think_tags": lambda r: remove_think_tags_reference(r["text"]),
    _JUDGE + "extract_information_and_others": lambda r: list(
        extract_information_and_others_reference(r["text"])
    ),
    _JUDGE + "extract_question": lambda r: extract_question_reference(r["question"]),
    _JUDGE + "generate": _generate,
    _MAKER + "filter": _filter,
    _MAKER + "process_experiences": lambda r: process_experiences_reference(
        r["rewards"],
        r["difficulty"],
        r["penalty"],
        r["n_samples_per_prompt"],
        r.get("advantage_estimator", "group_norm"),
    ),
    _COMPUTE_REWARD: lambda r: compute_reward_reference(
        r["r"], r["kl_coef"], r["kl"], r["num_actions"], r.get("reward_clip_range")
    ),
    _COMPOSITE: _composite,
}

# Trainer outputs are float32 torch values: our float32 emulation follows torch's reduction order for small rows
# but is not guaranteed bit-identical, so these compare at 1e-6 relative. The filter also runs in float32, but its
# outputs (indices, counts over the batch size) are exact, so it stays in the exact comparison.
APPROXIMATE: frozenset[str] = frozenset({_MAKER + "process_experiences", _COMPUTE_REWARD, _COMPOSITE})
