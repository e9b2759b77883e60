"""Search-R1's rewards: the outcome reward of the paper, and the outcome+format reward of its v0.3 scripts.

Paper mode takes a parsed :class:`~scoring.trajectory.Trajectory` (from :func:`scoring.formats.searchr1.parse_searchr1`)
and the gold answers. The reference variants take the raw decoded prompt+response string, as the released code did
(Search-R1 a14dc3a4 ``verl/utils/reward_score/qa_em.py`` and ``qa_em_format.py``; REFERENCE.md §b).

How they differ:

* the reference finds the answer with the ≥2-span rule over prompt+response
  (:func:`~scoring.formats.searchr1.extract_solution_reference`): a bare response with one answer has "no answer",
  and a response with none is scored as ``"Beijing"`` (the prompt's example). Paper mode uses the last closed
  ``<answer>`` of the response.
* the reference's format check needs the Qwen chat marker; paper mode accepts a bare response or a base-model
  prompt (same state machine otherwise).
* the reference's retrieval hit scans every ``<information>`` block of prompt+response (the prompt's own
  "<information> and </information>" counts); paper mode scans the contexts of the response's search steps.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from typing import Any

from scoring.formats.searchr1 import extract_solution_reference, is_valid_sequence_reference, tag_contents
from scoring.metrics import (
    as_golds,
    drop_articles,
    exact_match,
    normalized_golds,
    substring_match,
)
from scoring.rewards.result import Reward
from scoring.trajectory import Trajectory

_DELETE_PUNCTUATION = str.maketrans("", "", string.punctuation)

# v0.3's format-reward weights (qa_em_format.compute_score_em's defaults in the training scripts)
STRUCTURE_FORMAT_SCORE = 0.2
FINAL_FORMAT_SCORE = 0.1


def searchr1_outcome_reward(trajectory: Trajectory, golds: str | Iterable[str]) -> Reward:
    """The Search-R1 paper's reward: r(x, y) = EM(a_pred, a_gold) ∈ {0, 1}, no format term.

    ``a_pred`` is the final answer (the last closed ``<answer>``); no answer scores 0. The paper rewards the
    outcome whatever the format, so an invalid trajectory with a right answer still scores 1.
    """
    correct = trajectory.answer is not None and exact_match(trajectory.answer, golds)
    total = 1.0 if correct else 0.0
    return Reward(total=total, components={"outcome": total})


def retrieval_hit(trajectory: Trajectory, golds: str | Iterable[str]) -> bool:
    """Some gold answer (normalized) is a substring of some retrieved context (normalized) of the trajectory."""
    gold_norms = normalized_golds(golds)
    return any(step.context is not None and _covers(step.context, gold_norms) for step in trajectory.steps)


def _covers(passage: str, gold_norms: list[str]) -> bool:
    """``substring_match(passage, golds)`` given the normalized golds, skipping the costly normalization of a long
    passage when no gold can match: every token of a normalized gold is a substring of the lower-cased passage with
    its punctuation deleted (normalization only removes articles and whitespace from that), so a gold with a token
    missing there cannot match."""
    depunctuated = passage.lower().translate(_DELETE_PUNCTUATION)
    candidates = [g for g in gold_norms if all(token in depunctuated for token in g.split())]
    if not candidates:
        return False
    normalized = drop_articles(depunctuated)  # normalize_answer(passage), its first half already done
    return any(g in normalized for g in candidates)


def searchr1_format_reward(
    trajectory: Trajectory,
    golds: str | Iterable[str],
    *,
    structure_format_score: float = STRUCTURE_FORMAT_SCORE,
    final_format_score: float = FINAL_FORMAT_SCORE,
    retrieval_score: float = 0.0,
) -> Reward:
    """Search-R1 v0.3 outcome+format reward (REFERENCE.md §b pseudo-code; defaults of scripts/nq_hotpotqa/v0.3).

    ``valid`` = the trajectory follows the format; ``hit`` = valid and a gold appears in a retrieved context::

        no answer:        (sfs + rs if hit else sfs) if valid else 0
        answer right:     1 if valid else 1 - sfs                       # 1 / 0.8
        answer wrong:     (sfs + rs if hit else sfs) if valid else ffs  # 0.2 (0.3 with rs = 0.1) / 0.1

    Range: [0, 1] whenever 0 ≤ sfs, ffs, rs and sfs + rs ≤ 1 and ffs ≤ 1 (checked; a ``ValueError`` otherwise).
    Components: ``outcome`` (EM 1/0), ``format`` (valid 1/0), ``retrieval`` (hit 1/0).
    """
    _check_scores(structure_format_score, final_format_score, retrieval_score)
    gold_list = as_golds(golds)
    valid = trajectory.valid
    hit = valid and retrieval_hit(trajectory, gold_list)
    answer = trajectory.answer
    correct = answer is not None and exact_match(answer, gold_list)
    total = _combine(
        valid=valid,
        hit=hit,
        answered=answer is not None,
        correct=correct,
        structure_format_score=structure_format_score,
        final_format_score=final_format_score,
        retrieval_score=retrieval_score,
        score=1.0,
    )
    return Reward(
        total=total,
        components={
            "outcome": 1.0 if correct else 0.0,
            "format": 1.0 if valid else 0.0,
            "retrieval": 1.0 if hit else 0.0,
        },
    )


def _check_scores(structure_format_score: float, final_format_score: float, retrieval_score: float) -> None:
    if min(structure_format_score, final_format_score, retrieval_score) < 0:
        raise ValueError("format and retrieval scores must be >= 0")
    if structure_format_score + retrieval_score > 1 or final_format_score > 1:
        raise ValueError("structure_format_score + retrieval_score and final_format_score must be <= 1")


def _combine(
    *,
    valid: bool,
    hit: bool,
    answered: bool,
    correct: bool,
    structure_format_score: float,
    final_format_score: float,
    retrieval_score: float,
    score: float,
) -> float:
    """The branch structure of ``qa_em_format.compute_score_em``, shared by paper mode and the reference variant
    (only how valid/hit/answer are found differs). Sums happen in the reference's order so floats match."""
    format_only = structure_format_score + retrieval_score if hit else structure_format_score
    if not answered:
        return format_only if valid else 0.0
    if correct:
        return score if valid else score - structure_format_score
    return format_only if valid else final_format_score


def retrieval_hit_reference(solution_str: str, golds: str | Iterable[str]) -> bool:
    """Search-R1 ``qa_em_format.is_retrieval_correct``: every ``<information>`` block of prompt+response, stripped,
    is tested with Sub-EM against every gold (so the prompt's "<information> and </information>" is a block)."""
    gold_norms = normalized_golds(golds)
    return any(_covers(block.strip(), gold_norms) for block in tag_contents(solution_str, "information"))


def searchr1_format_reward_reference(
    solution_str: str,
    golds: str | Iterable[str],
    *,
    structure_format_score: float = 0.0,
    final_format_score: float = 0.0,
    retrieval_score: float = 0.0,
    format_score: float = 0.0,
    score: float = 1.0,
) -> float:
    """Search-R1 ``qa_em_format.compute_score_em`` bit for bit (``golds`` = ``ground_truth["target"]``).

    Defaults are the function's own (all 0); training passes sfs=0.2, ffs=0.1, rs=0. ``format_score`` is accepted
    and unused, as in the reference. See the module docstring for how this differs from
    :func:`searchr1_format_reward`; parameters are not range-checked here.
    """
    del format_score  # accepted for signature parity; the reference never reads it
    gold_list = as_golds(golds)
    valid, _ = is_valid_sequence_reference(solution_str)
    hit = valid and retrieval_hit_reference(solution_str, gold_list)
    answer = extract_solution_reference(solution_str)
    return _combine(
        valid=valid,
        hit=hit,
        answered=answer is not None,
        correct=answer is not None and exact_match(answer, gold_list),
        structure_format_score=structure_format_score,
        final_format_score=final_format_score,
        retrieval_score=retrieval_score,
        score=score,
    )


def searchr1_em_reward_reference(
    solution_str: str, golds: str | Iterable[str], *, format_score: float = 0.0, score: float = 1.0
) -> float:
    """Search-R1 ``qa_em.compute_score_em`` (the paper's reward as released): no answer → 0, EM → ``score``, else
    ``format_score``. The answer comes from :func:`extract_solution_reference` (≥2-span rule, "Beijing")."""
    answer = extract_solution_reference(solution_str)
    if answer is None:
        return 0.0
    return score if exact_match(answer, golds) else format_score


def searchr1_subem_reward_reference(
    solution_str: str, golds: str | Iterable[str], *, format_score: float = 0.0, score: float = 1.0
) -> float:
    """Search-R1 ``qa_em.compute_score_subem``: as :func:`searchr1_em_reward_reference` with Sub-EM (a normalized
    gold is a character substring of the normalized answer)."""
    answer = extract_solution_reference(solution_str)
    if answer is None:
        return 0.0
    return score if substring_match(answer, golds) else format_score


def ground_truth_target(ground_truth: Mapping[str, Any]) -> list[str]:
    """The gold answers of a Search-R1 parquet row's ``reward_model.ground_truth`` (``{"target": [...]}``)."""
    return as_golds(ground_truth["target"])
