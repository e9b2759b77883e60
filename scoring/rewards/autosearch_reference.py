"""AutoSearch's reward as the released code computes it (bofusun/AutoSearch 75ce1c5a; REFERENCE.md §b AutoSearch).

Two functions reproduce it exactly:

* :func:`compute_score_em_reference` — ``verl/utils/reward_score/qa_em_format_turn62.compute_score_em``: the final
  answer's EM and one format score per turn.
* :func:`autosearch_reward_reference` — ``verl/trainer/main_ppo_format_turn_new78.RewardManager.__call__`` for one
  sample: the per-token float32 reward tensor (every reward sits on the last token of a turn's response, the
  answer score on the last valid token), the self-answering prompts, and the logged metrics.

The reward tensor is float32 in the released code; every write here is rounded to float32 the way torch does it
(``tensor[pos] += x`` adds ``float32(x)`` in float32), so values agree with the vectors to ~1 ulp (the vectors are
compared at a relative tolerance of 1e-6). Positions are those of a tokenizer with one token per character, which
is how the vectors were made; with a real tokenizer only the positions change, never which turn a reward lands on.

How the released code differs from the paper (:mod:`scoring.rewards.autosearch`):

1. Format (Eq. 1): a valid intermediate turn gets +sfs/8 = +0.025 (paper 0), an invalid one −sfs/8 = −0.025
   (paper −0.05); the terminal turn ``final_format_score`` 0.1 / −0.5 as in the paper. The format check of the last
   turn allows nothing but whitespace after ``</answer>`` (a trailing ``<|im_end|>`` is invalid).
2. Repeat detection (Eq. 1): TF-IDF quirks — a turn without a search counts as a repeat, queries of only
   one-character tokens count as a repeat (sklearn's empty-vocabulary error), earlier turns without a query
   compare as "None" (:func:`scoring.formats.autosearch.is_repeat_part`).
3. Outcome (Eq. 2): the answer is found with Search-R1's ≥2-span rule over prompt + response; with a prompt that
   holds no ``<answer>`` example, a response without an answer makes ``em_check(None)`` raise ``AttributeError``
   (the trainer would crash) — reproduced on purpose.
4. Self-answering (Eqs. 4–5): the prompt is a hard-coded Qwen chat string, not Prompt 1, and is built after every
   turn with an observation, including the invalid-action notice.
5. t_c (Eq. 6): intermediate answers are judged by EM against the *first* gold only, and the last turn with an
   observation is never a stopping candidate; no t_c is "none found" (no −1).
6. Quality (Eqs. 8–9): F1 (rounded to 4 places) against the first gold only; the gain is clamped at 0
   (max(0, F1_t − best)); gains stop after t_c; the k-th gain is written on the k-th *turn* (not the k-th turn with
   an observation: the same turn whenever only the last turn lacks one).
7. Efficiency (Eq. 7), only when some turn had an observation: every constant halved — wrong final answer: +0.0125
   (paper 0.025 when t_c < 0) on every turn whose format score ≥ 0, *including the final turn*, decided by the
   final answer rather than by t_c; right final answer with t_c: 0.5·(0.4/(t_c + 1) − 0.05) on turns 0..t_c (ε = 1
   with 0-based t_c), stopping at the first turn whose format score is negative; right final answer without t_c:
   0.5·(0.4/(T − 1) − 0.05) on every turn with format score ≥ 0 (T = number of turns), including the final turn;
   +0.2 for a right one-turn answer (only reachable when that single turn has an observation).
8. Over-search (Eq. 7): every turn after t_c is *overwritten* with −0.05 (paper: −0.1 added), which also erases the
   final turn's format, outcome and efficiency rewards — right final answer or not.
9. ``process_reward_ratio`` scales the format scores only; with ``is_validation`` the quality, efficiency and
   over-search terms are skipped (the validation reward is the outcome alone) but t_c and its metrics are still
   computed.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.formats.autosearch import (
    extract_solution_reference,
    is_repeat_part,
    is_valid_answer_part,
    is_valid_search_part,
)
from scoring.judging.autosearch import extract_intermediate_answer, intermediate_prompts_reference
from scoring.metrics import exact_match, normalize_answer, query_f1
from scoring.rewards.autosearch import early_correct_ratio
from scoring.rewards.result import Reward

_FLOAT32 = struct.Struct("f")
OVER_SEARCH_OVERWRITE = -0.05
WRONG_ANSWER_BONUS = 0.0125
ONE_TURN_BONUS = 0.2


def f32(value: float) -> float:
    """Round a float64 to the nearest float32, as storing it in a torch float32 tensor does."""
    result: float = _FLOAT32.unpack(_FLOAT32.pack(value))[0]
    return result


def _em_check(prediction: str | None, golds: str | Sequence[str]) -> bool:
    if prediction is None:  # the released em_check calls normalize_answer(None)
        raise AttributeError("'NoneType' object has no attribute 'lower'")
    return exact_match(prediction, golds)


@dataclass(frozen=True, slots=True)
class StepFormatScores:
    """What ``qa_em_format_turn62.compute_score_em`` returns: ``answer_score`` is 1.0 or the int 0, as released."""

    answer_score: float
    step_scores: tuple[float, ...]


def compute_score_em_reference(
    solution_str: str,
    golds: str | Sequence[str],
    new_parts: Sequence[str],
    *,
    structure_format_score: float = 0.0,
    final_format_score: float = 0.0,
    score: float = 1.0,
) -> StepFormatScores:
    """``qa_em_format_turn62.compute_score_em``: EM of the ≥2-span answer of ``solution_str`` (prompt + response)
    against every gold, and a format score per turn response in ``new_parts`` (the last one is the answer turn).

    Raises ``AttributeError`` when there is no answer (fewer than two ``<answer>`` spans) and ``IndexError`` when
    ``new_parts`` is empty, as the released code does.
    """
    answer = extract_solution_reference(solution_str)
    answer_score: float = score if _em_check(answer, golds) else 0
    if not new_parts:
        raise IndexError("list index out of range")
    step_scores: list[float] = []
    for i, part in enumerate(new_parts[:-1]):
        valid = is_valid_search_part(part) and not is_repeat_part(part, new_parts[:i])
        step_scores.append(structure_format_score / 8 if valid else -structure_format_score / 8)
    step_scores.append(final_format_score if is_valid_answer_part(new_parts[-1]) else -0.5)
    return StepFormatScores(answer_score, tuple(step_scores))


@dataclass(frozen=True, slots=True)
class ReferenceTurn:
    """One turn as the released RewardManager decodes it: the policy's response and the observation after it
    (``"\\n\\n<information>…</information>\\n\\n"``, the invalid-action notice, or ``""`` for the last turn)."""

    response: str
    observation: str = ""


@dataclass(frozen=True, slots=True)
class AutoSearchReferenceResult:
    """One sample's reward from ``RewardManager.__call__`` (float32 values as Python floats)."""

    per_turn_rewards: tuple[float, ...]  # the reward on the last response token of each turn
    # the whole row of the reward tensor, summed in float32 in position order (torch's vectorised sum may add in
    # another order: up to an ulp or two apart)
    reward_sum: float
    # nonzero rewards on other tokens: the answer score, when the last turn has an observation after it
    outside_turn_ends: dict[int, float]
    reward_em: float  # logged val/test_score_em
    reward_f1: float
    early_correct: float
    early_correct_ratio: float
    first_correct_turn: int | None  # t_c, 0-based among the turns with an observation
    intermediate_prompts: tuple[str, ...]
    format_scores: StepFormatScores  # compute_score_em's answer score and per-turn format scores

    @property
    def reward(self) -> Reward:
        return Reward(
            total=self.reward_sum,
            components={"answer_score": float(self.format_scores.answer_score)},
            step_rewards=self.per_turn_rewards,
        )


def _first_gold(ground_truth_target: str | Sequence[str]) -> str:
    # RewardManager: target list -> its first item ("" when empty); a bare string stays whole
    if isinstance(ground_truth_target, str):
        return normalize_answer(ground_truth_target)
    return normalize_answer(str(ground_truth_target[0])) if len(ground_truth_target) > 0 else ""


def _final_em_and_f1(sequences_str: str, golds: str | Sequence[str]) -> tuple[float, float]:
    # qa_em.compute_score_em / qa_f1.compute_score_f1 with format_score=0: no ≥2-span answer scores 0
    answer = extract_solution_reference(sequences_str)
    if answer is None:
        return 0.0, 0.0
    return (1.0 if exact_match(answer, golds) else 0.0), query_f1(answer, golds)


def autosearch_reward_reference(
    prompt_text: str,
    turns: Sequence[ReferenceTurn],
    golds: str | Sequence[str],
    intermediate_replies: Sequence[str] | None,
    *,
    structure_format_score: float = 0.2,
    final_format_score: float = 0.1,
    process_reward_ratio: float = 1.0,
    is_validation: bool = False,
) -> AutoSearchReferenceResult:
    """``RewardManager.__call__`` for one sample (training defaults: sfs 0.2, ffs 0.1, ratio 1).

    ``intermediate_replies`` are the policy's raw self-answering replies, one per turn with an observation, in
    order (``None``: no actor was passed, so no self-answering, as in the released code without
    ``actor_rollout_wg``). The prompts they answer are in the result's ``intermediate_prompts``.
    """
    question_prompts = intermediate_prompts_reference(
        prompt_text, [(t.response, t.observation) for t in turns]
    )
    sequences_str = prompt_text + "".join(t.response + t.observation for t in turns)
    reward_em, reward_f1 = _final_em_and_f1(sequences_str, golds)
    gold = _first_gold(golds)

    turn_ends: list[int] = []  # last token of each response (one token per character)
    cursor = 0
    for turn in turns:
        cursor += len(turn.response)
        turn_ends.append(cursor - 1)
        cursor += len(turn.observation)
    valid_length = cursor
    n_turns, n_info = len(turns), sum(1 for t in turns if t.observation)

    scores = compute_score_em_reference(
        sequences_str,
        golds,
        [t.response for t in turns],
        structure_format_score=structure_format_score,
        final_format_score=final_format_score,
    )
    rewards: dict[int, float] = {}

    def add(position: int, value: float) -> None:
        if 0 <= position < valid_length:
            rewards[position] = f32(rewards.get(position, 0.0) + f32(value))

    for position, step_score in zip(turn_ends, scores.step_scores, strict=True):
        add(position, f32(f32(process_reward_ratio) * f32(step_score)))
    add(valid_length - 1, scores.answer_score)

    first_correct: int | None = None
    self_answered = intermediate_replies is not None and n_info > 0  # "i in per_sample_per_turn_answer"
    if intermediate_replies is not None and n_info > 0:
        if len(intermediate_replies) != n_info:
            raise ValueError(f"{len(intermediate_replies)} intermediate replies for {n_info} observed turns")
        best: float = 0
        for local_t, reply in enumerate(intermediate_replies):
            answer = extract_intermediate_answer(reply)
            f1 = query_f1(answer, gold)
            gain = max(0, f1 - best)
            best = max(f1, best)
            if not is_validation:
                add(turn_ends[local_t], gain)  # sic: the local_t-th turn, not the local_t-th observed turn
            if local_t >= n_info - 1:
                continue  # the last observed turn is never a stopping candidate
            if exact_match(answer, gold):
                first_correct = local_t
                break

    if self_answered and not is_validation:
        for t, position in enumerate(turn_ends):
            step_ok = scores.step_scores[t] >= 0
            if scores.answer_score == 0:
                if step_ok:
                    add(position, WRONG_ANSWER_BONUS)
            elif n_turns == 1:
                add(position, ONE_TURN_BONUS)
            elif first_correct is not None:
                if not (t <= first_correct and step_ok):
                    break
                add(position, 0.5 * (0.4 / (first_correct + 1) - 0.05))
            elif step_ok:
                add(position, 0.5 * (0.4 / (n_turns - 1) - 0.05))

    if first_correct is not None and not is_validation:
        for position in turn_ends[first_correct + 1 :]:
            if 0 <= position < valid_length:
                rewards[position] = f32(OVER_SEARCH_OVERWRITE)

    total = 0.0
    for position in sorted(rewards):
        total = f32(total + rewards[position])
    ends = set(turn_ends)
    return AutoSearchReferenceResult(
        per_turn_rewards=tuple(rewards.get(position, 0.0) for position in turn_ends),
        reward_sum=total,
        outside_turn_ends={p: v for p, v in sorted(rewards.items()) if p not in ends and v != 0.0},
        reward_em=f32(reward_em),
        reward_f1=f32(reward_f1),
        early_correct=1.0 if first_correct is not None else 0.0,
        early_correct_ratio=f32(early_correct_ratio(n_info, first_correct)),
        first_correct_turn=first_correct,
        intermediate_prompts=tuple(question_prompts),
        format_scores=scores,
    )


def reference_turns(records: Sequence[Mapping[str, Any]]) -> list[ReferenceTurn]:
    """Turns from the vectors' ``[{"response": …, "info": …}]`` shape."""
    return [ReferenceTurn(str(r["response"]), str(r.get("info", ""))) for r in records]
