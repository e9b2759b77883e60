"""HiPRAG's hierarchical process reward (HiPRAG Sec. 3.3, Eq. 1) and the released ``compute_score_em``.

Paper mode, :func:`hiprag_reward`::

    R(T) = A(T)(1 − λf) + λf·F(T) + λp·A(T)·F(T)·N_corr(T)/N(T)                      (HiPRAG Eq. 1)
    N_corr(T) = |{s^R ∈ T : ¬Over(s^R)}| + |{s^NR ∈ T : ¬Under(s^NR)}|

A = cover exact match of the final answer with HiPRAG's normalizer (Sec. 4.1), F = the format checker (Algorithms
2–3, :func:`scoring.formats.hiprag.parse_hiprag`), N = all steps. The bonus is gated: only when A = F = 1, where
R = 1 + λp·N_corr/N. With λf ∈ [0, 1] and λp ≥ 0, R ∈ [0, 1 + λp] (the paper's own bound: 1 + λp when every step
is optimal); R ≤ 1 only when λp = 0.

Sec. 5.3 ablations (``process=``): "over_only" counts only search steps (N = search steps, N_corr = those not
over-searched), "under_only" only non-search steps; "the ignored step type is excluded from the computation of the
process bonus ratio". A trajectory with no step of the evaluated type gets "the average bonus within the current
training batch": pass it as ``batch_average_bonus`` (see :func:`hiprag_rewards_for_batch`).

Reference variant, :func:`hiprag_reward_reference` (``qa_em_format.compute_score_em``, REFERENCE.md §b and
"Discrepancies" 1–3): the bonus is 0.4·N_corr/N_search (numerator over all steps, denominator search steps only,
so it can exceed λp), a trajectory without search steps gets +0.4 whatever its under-search verdicts, λp = 0.4 is
hard-coded, A reads the last ``<answer>`` of prompt+response, F is the training checker, and
``structure_format_score == 0`` (validation) returns plain CEM of ``extract_solution``. Its range is therefore
[0, 1 + 0.4·N/max(1, N_search)] — e.g. 1.8 for one search step among three, 1.4 with no search at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from scoring.errors import BatchAverageRequired, ScoringInputError
from scoring.formats.hiprag_checkers import check_format_optimized_reference, steps_reference
from scoring.judging.hiprag import (
    between,
    over_search_flag_reference,
    over_search_message_reference,
    under_search_flag_reference,
    under_search_message,
)
from scoring.metrics import cover_exact_match
from scoring.rewards.result import Reward
from scoring.trajectory import StepKind, Trajectory
from scoring.verdicts import MissingVerdict, Verdict

Process = Literal["both", "over_only", "under_only"]
PROCESSES: tuple[Process, ...] = ("both", "over_only", "under_only")  # Sec. 5.3's ablations, and Eq. 1 whole
LAMBDA_F = 0.2  # Eq. 1's format weight λf (the released qa_em_format's structure_format_score)
LAMBDA_P = 0.4  # Eq. 1's process-bonus weight λp
REFERENCE_LAMBDA_P = 0.4  # hard-coded in qa_em_format.compute_score_em


def search_r1_format_hiprag(
    trajectory: Trajectory, golds: str | Iterable[str], *, lambda_f: float = LAMBDA_F
) -> Reward:
    """The outcome + format part of HiPRAG Eq. 1 (Search-R1 v0.3's reward on HiPRAG's format): A(1−λf) + λf·F."""
    answer = cover_exact_match(trajectory.answer, golds)
    valid = trajectory.valid
    return Reward(
        total=_outcome_format(answer, valid, lambda_f),
        components={"answer": float(answer), "format": float(valid)},
    )


def _outcome_format(answer: bool, valid: bool, lambda_f: float) -> float:
    # A(1−λf) + λf·F by cases, so that the four values are exactly 1, 1−λf, λf and 0 as in the released code.
    if answer:
        return 1.0 if valid else 1.0 - lambda_f
    return lambda_f if valid else 0.0


def _flag(flags: Sequence[Verdict], index: int, detector: str) -> bool:
    if index >= len(flags):
        raise MissingVerdict(f"step {index + 1}: no {detector} verdict")
    verdict = flags[index]
    if not verdict.usable:
        raise MissingVerdict(f"step {index + 1}: {detector} verdict is {verdict.value}")
    return verdict is Verdict.TRUE


def hiprag_reward(
    trajectory: Trajectory,
    golds: str | Iterable[str],
    step_flags: Sequence[Verdict],
    *,
    lambda_f: float = LAMBDA_F,
    lambda_p: float = LAMBDA_P,
    process: Process = "both",
    batch_average_bonus: float | None = None,
) -> Reward:
    """HiPRAG Eq. 1 for one parsed trajectory.

    ``step_flags[i]`` is the detector verdict of ``trajectory.steps[i]``: for a search step TRUE = over-search, for
    a non-search step TRUE = under-search. Verdicts are read only when the bonus is due (A = F = 1), and only for
    the steps the ``process`` counts; a needed verdict that is missing, UNPARSEABLE or ERROR raises
    :class:`MissingVerdict` naming the step. ``batch_average_bonus`` (the λp-weighted bonus) is used, and required,
    only for an ablation whose evaluated step type is absent from the trajectory (Sec. 5.3).
    """
    if process not in ("both", "over_only", "under_only"):
        raise ScoringInputError(
            "process", f"unknown process {process!r}: use 'both', 'over_only' or 'under_only'"
        )
    if len(step_flags) > len(trajectory.steps):
        raise ScoringInputError("step_flags", f"{len(step_flags)} verdicts for {len(trajectory.steps)} steps")
    answer = cover_exact_match(trajectory.answer, golds)
    valid = trajectory.valid
    n_search = trajectory.n_searches
    components: dict[str, float] = {
        "answer": float(answer),
        "format": float(valid),
        "process_bonus": 0.0,
        "n_steps": float(len(trajectory.steps)),
        "n_search": float(n_search),
        "n_non_search": float(len(trajectory.steps) - n_search),
    }
    total = _outcome_format(answer, valid, lambda_f)
    if not (answer and valid):  # HiPRAG Eq. 1: the bonus is gated by A(T)·F(T)
        return Reward(total=total, components=components)
    counted = optimal = over = under = 0
    for index, step in enumerate(trajectory.steps):
        if step.kind is StepKind.SEARCH:
            if process == "under_only":
                continue
            flagged = _flag(step_flags, index, "over-search")
            over += flagged
        else:
            if process == "over_only":
                continue
            flagged = _flag(step_flags, index, "under-search")
            under += flagged
        counted += 1
        optimal += not flagged
    if counted:
        bonus = lambda_p * optimal / counted
    elif process == "both":
        # Algorithm 2 makes N ≥ 1 for every valid trajectory; a hand-built valid one without steps has no ratio.
        raise ScoringInputError("trajectory", "a valid HiPRAG trajectory has at least one step (Algorithm 2)")
    elif batch_average_bonus is None:
        raise BatchAverageRequired(
            "batch_average_bonus",
            f"process={process}: the trajectory has no step of the evaluated type; HiPRAG Sec. 5.3 gives it the "
            "batch's average bonus: pass batch_average_bonus, or score the batch (scoring.scorer.score_batch, "
            "hiprag_rewards_for_batch)",
        )
    else:
        bonus = batch_average_bonus
    components.update(
        process_bonus=bonus,
        n_counted=float(counted),
        n_optimal=float(optimal),
        n_over=float(over),
        n_under=float(under),
    )
    return Reward(total=total + bonus, components=components)


def hiprag_rewards_for_batch(
    trajectories: Sequence[Trajectory],
    golds: Sequence[str | Iterable[str]],
    step_flags: Sequence[Sequence[Verdict]],
    *,
    lambda_f: float = LAMBDA_F,
    lambda_p: float = LAMBDA_P,
    process: Process = "both",
) -> list[Reward]:
    """:func:`hiprag_reward` over a training batch, filling the Sec. 5.3 ablations' empty-type bonus.

    The paper says only "the average bonus within the current training batch". Chosen here: the mean λp·ratio over
    the batch's trajectories that earn a bonus of their own (A = F = 1 and at least one step of the evaluated
    type), 0 when there are none.
    """
    if not len(trajectories) == len(golds) == len(step_flags):
        raise ScoringInputError(
            "step_flags",
            f"{len(trajectories)} trajectories, {len(golds)} golds and {len(step_flags)} step_flags lists "
            "must have the same length",
        )
    pending = [
        _lacks_evaluated_type(trajectory, gold, process)
        for trajectory, gold in zip(trajectories, golds, strict=True)
    ]
    rewards: list[Reward | None] = [
        None
        if lacks
        else hiprag_reward(trajectory, gold, flags, lambda_f=lambda_f, lambda_p=lambda_p, process=process)
        for lacks, trajectory, gold, flags in zip(pending, trajectories, golds, step_flags, strict=True)
    ]
    average = average_earned_bonus(r for r in rewards if r is not None)
    return [
        hiprag_reward(
            trajectory,
            gold,
            flags,
            lambda_f=lambda_f,
            lambda_p=lambda_p,
            process=process,
            batch_average_bonus=average,
        )
        if reward is None
        else reward
        for reward, trajectory, gold, flags in zip(rewards, trajectories, golds, step_flags, strict=True)
    ]


def average_earned_bonus(rewards: Iterable[Reward]) -> float:
    """HiPRAG Sec. 5.3's "average bonus within the current training batch": the mean λp·N_corr/N over the rewards
    that earned a bonus of their own (A = F = 1 and at least one step of the evaluated type; a reward that was
    itself given the batch average has ``n_counted`` = 0 and is left out), 0 when none did."""
    earned = [r.components["process_bonus"] for r in rewards if r.components.get("n_counted", 0.0) > 0]
    return sum(earned) / len(earned) if earned else 0.0


def _lacks_evaluated_type(trajectory: Trajectory, golds: str | Iterable[str], process: Process) -> bool:
    """True when an ablation's bonus is due (A = F = 1) but the trajectory has no step of the evaluated type."""
    if process == "both" or not trajectory.valid or not cover_exact_match(trajectory.answer, golds):
        return False
    wanted = StepKind.SEARCH if process == "over_only" else StepKind.NON_SEARCH
    return all(step.kind is not wanted for step in trajectory.steps)


# --- reference variant (qa_em_format.py, main_ppo_format.py) ---------------------------------------------------

_SOLUTION = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def extract_solution_reference(solution_str: str) -> str | None:
    """Search-R1 ``extract_solution`` as HiPRAG copies it: the last ``<answer>`` span stripped, but None unless
    prompt+response holds at least two spans."""
    matches = _SOLUTION.findall(solution_str)
    return matches[-1].strip() if len(matches) > 1 else None


def search_r1_format_reference(
    model_response: str,
    golds: str | Iterable[str],
    lambda_f: float = 0.4,
    *,
    trailing_text_check: bool = True,
) -> float:
    """HiPRAG ``search_r1_format``: A from the last ``<answer>`` (``str.find`` pairs over the whole string, "" if
    none), F from the released checker. ``trailing_text_check=False`` with ``lambda_f=0.2`` is the ``reward.py``
    copy; the ``qa_em_format.py`` default λf is 0.4 (training passes 0.2)."""
    answers = between(model_response, "<answer>", "</answer>")
    answer = cover_exact_match(answers[-1].strip() if answers else "", golds)
    valid = check_format_optimized_reference(model_response, reject_trailing_text=trailing_text_check)
    return _outcome_format(answer, valid, lambda_f)


@dataclass(frozen=True, slots=True)
class ReferenceStepCheck:
    """One step as ``compute_score_em`` judges it: its inner text, whether it counts as a search step
    (``"<search>" in step``) and the judge message it sends (None: no call, the step counts as not over-searched)."""

    step_content: str
    is_search: bool
    judge_message: str | None


def hiprag_reference_step_checks(
    solution_str: str,
    golds: str | Iterable[str],
    regenerated: Mapping[str, str],
    *,
    structure_format_score: float = 0.2,
) -> tuple[ReferenceStepCheck, ...]:
    """The judge calls ``compute_score_em`` makes, in order; empty when its gate (reward == 1, sfs ≠ 0) is shut."""
    if structure_format_score == 0:
        return ()
    if search_r1_format_reference(solution_str, golds, lambda_f=structure_format_score) != 1:
        return ()
    checks = []
    for step in steps_reference(solution_str)[0]:
        if "<search>" in step:
            checks.append(ReferenceStepCheck(step, True, over_search_message_reference(step, regenerated)))
        else:
            checks.append(ReferenceStepCheck(step, False, under_search_message(step)))
    return tuple(checks)


def reference_flags_from_replies(
    checks: Sequence[ReferenceStepCheck], replies_in_call_order: Iterable[str | None]
) -> list[bool]:
    """Flags (over-search for search steps, under-search otherwise) from the judge replies in call order, parsed
    as the released code does (``None`` = the API call raised → not flagged)."""
    replies = iter(replies_in_call_order)
    flags = []
    for check in checks:
        if check.judge_message is None:
            flags.append(False)
        elif check.is_search:
            flags.append(over_search_flag_reference(next(replies)))
        else:
            flags.append(under_search_flag_reference(next(replies)))
    return flags


def hiprag_reward_reference(
    solution_str: str,
    golds: str | Iterable[str],
    step_flags: Sequence[bool],
    *,
    structure_format_score: float = 0.2,
) -> float:
    """HiPRAG ``compute_score_em`` with its judge outcomes given (``step_flags`` aligned with
    :func:`~scoring.formats.hiprag_checkers.steps_reference`; True = over-searched for a search step, under-searched
    otherwise; pass False where the released code made no call or the call failed).

    Differences from Eq. 1 (REFERENCE.md "Discrepancies" 1–3): bonus 0.4·N_corr/N_search with +0.4 when there is
    no search step; λp = 0.4 fixed; validation (sfs = 0) returns the int CEM of :func:`extract_solution_reference`.
    """
    if structure_format_score == 0:
        return int(cover_exact_match(extract_solution_reference(solution_str), golds))
    reward = search_r1_format_reference(solution_str, golds, lambda_f=structure_format_score)
    if reward != 1:
        return reward
    steps = steps_reference(solution_str)[0]
    if len(step_flags) != len(steps):
        raise ScoringInputError("step_flags", f"{len(step_flags)} flags for {len(steps)} steps")
    correct = sum(not flag for flag in step_flags)
    searches = sum("<search>" in step for step in steps)
    if steps:
        # Same operation order as the released code: (0.4 * correct) / searches.
        reward += REFERENCE_LAMBDA_P * correct / searches if searches > 0 else REFERENCE_LAMBDA_P
    return reward
