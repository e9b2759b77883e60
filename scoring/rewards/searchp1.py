"""Search-P1's path-centric reward (arXiv 2602.22576, §3.2 and Appendix C, Algorithm 3).

    R_total = λp·R_path + λa·R_outcome + λf·R_format                                     (Eq. 4)
    S_self  = r_planner · (n_exec_self / n_plan) · (n_exec_self / n_actions)             (Eq. 6)
    S_ref   = (n_covered / |R_ref|) · (n_covered / n_actions)                              (Eq. 7)
    R_path  = max(S_self, S_ref)                                        (§3.2.2, unnumbered)
    R_outcome = 1 if correct, else α·r_acc + (1−α)·r_reason, α = 0.8                      (Eq. 8)
    R_format = 0.1 if valid format, answer and tool call; 0.05 if answer and tool response;
               otherwise the whole reward is 0                                  (Algorithm 3, lines 2–7)

with λf = 0.1, λp = 0.3, λa = 0.6 (Appendix B.2). The counts and the scores r_planner, r_acc, r_reason come from
one LLM evaluator call per rollout (the dual-track evaluator, :mod:`scoring.judging.searchp1`); they are *inputs*
here (:class:`SearchP1Evaluation`). ``n_actions`` is the number of tool calls of the trajectory (the a_i of Eq. 1
are search actions; the final answer is â, not an action), ``|R_ref|`` the number of steps of the offline
reference path. No code was released by the authors (REFERENCE.md, last section), so there is no reference variant
to be bit-compatible with: the vectors in searchp1_paper.jsonl encode these equations and the adapters call the
functions below.

Where the paper contradicts itself, and what we do:

* Main text vs Algorithm 3. Eqs. 6–7 multiply by the efficiency ratio n_effective/n_actions; Algorithm 3 (lines
  15, 18) omits it. ``variant="main"`` (the default) follows the equations, ``variant="alg3"`` the algorithm. Both
  use Algorithm 3's format reward (the main text never defines R_format beyond "soft format", §4.3.1) and sum in
  their own order (Eq. 4 vs line 29; the same terms).
* Appendix B.2 describes self-consistency as Jaccard agreement over 3 sampled paths and the soft outcome as a 0.5
  decay for partial matches. Neither matches Eqs. 6/8, the evaluator prompt (Fig. 10 here / Fig. 9 of arXiv v1)
  or Algorithm 3, which all agree with each other; we implement those and not B.2.
* Algorithm 3 writes the soft outcome as ``0.8·acc + 0.2·reason``; we compute α·r_acc + (1−α)·r_reason in both
  variants (the vectors do: 0.8·0.5 + 0.2·1.0 is 0.6000000000000001, Eq. 8 gives 0.6).
* "Correct" (Eq. 8) is Algorithm 3's EXACTMATCH(GETANSWER(y), a*): SQuAD-normalized exact match against any gold
  answer (:func:`scoring.metrics.exact_match`). The paper *evaluates* with a containment accuracy (§4.1), which is
  not the training reward.

Where the paper is silent, and what we chose:

* A zero denominator (no planned steps, an empty reference path, no tool call) makes that term 0 (as the vectors).
* An efficiency ratio above 1 (the evaluator counts more effective steps than the trajectory made tool calls, e.g.
  a plan step done by reasoning alone) is capped at 1: the ratio exists "to prevent reward hacking through
  excessive redundant steps" (§3.2.2), and uncapped it would *pay* a long plan executed with one search.
* The evaluator's counts must be consistent: ``effective_steps_self ≤ model_plan_steps`` (checked by
  :class:`SearchP1Evaluation`) and ``effective_steps_ref ≤ |R_ref|`` (checked here): a judge reply that breaks them
  is unusable and raises :class:`~scoring.verdicts.MissingVerdict`, like a missing evaluation does.
* The planner score goes up to 1.2 ("Excellent"), so S_self and R_path can reach 1.2 (no clipping, as the
  paper and the vectors). With the default weights R_total is 0 for an invalid trajectory and otherwise lies in
  [0.005, 0.97]; in general in [0, 0.1·λf + 1.2·λp + λa].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from scoring.formats.searchp1 import SearchP1FormatFacts, searchp1_format_facts
from scoring.metrics import exact_match
from scoring.rewards.result import Reward
from scoring.trajectory import Trajectory
from scoring.verdicts import MissingVerdict

Variant = Literal["main", "alg3"]
VARIANTS: tuple[Variant, ...] = ("main", "alg3")

ALPHA = 0.8  # Eq. 8
FORMAT_FULL = 0.1  # Algorithm 3, line 3
FORMAT_SOFT = 0.05  # Algorithm 3, line 5
MAX_PLANNER_SCORE = 1.2  # Fig. 10 rubric: 0.2 / 0.6 / 1.0 / 1.2
# No trajectory has this many steps; a larger count is a judge gone wrong, and would overflow float division.
MAX_STEP_COUNT = 10_000
INVALID_TRAJECTORY_NOTE = "invalid trajectory -> 0 (Alg. 3 line 7)"


@dataclass(frozen=True, slots=True)
class SearchP1Weights:
    """Eq. 4's coefficients (Appendix B.2 defaults) and Eq. 8's α."""

    lambda_f: float = 0.1
    lambda_p: float = 0.3
    lambda_a: float = 0.6  # λo in Algorithm 3
    alpha: float = ALPHA


@dataclass(frozen=True, slots=True)
class SearchP1Evaluation:
    """The dual-track evaluator's reply (Fig. 10's JSON fields; Algorithm 3 lines 11–26).

    Construction checks the ranges the rubric allows (scores within their scales, counts in [0, MAX_STEP_COUNT], no more
    executed plan steps than planned steps) and raises ``ValueError`` otherwise; whether a score is exactly one of
    the rubric's levels is the reply parser's concern (:func:`scoring.judging.searchp1.parse_evaluator_reply`).
    """

    planner_score: float  # r_planner (Eq. 6)
    model_plan_steps: int  # n_plan (Eq. 6): the evaluator's count of the model's planned steps
    effective_steps_self: int  # n_exec_self (Eq. 6): planned steps the trajectory executed
    effective_steps_ref: int  # n_covered (Eq. 7): reference steps covered, in any order
    outcome_accuracy_score: float  # r_acc (Eq. 8)
    outcome_reasoning_score: float  # r_reason (Eq. 8)

    def __post_init__(self) -> None:
        for name, value, top in (
            ("planner_score", self.planner_score, MAX_PLANNER_SCORE),
            ("outcome_accuracy_score", self.outcome_accuracy_score, 1.0),
            ("outcome_reasoning_score", self.outcome_reasoning_score, 1.0),
        ):
            # A huge int compares exactly with a float (no overflow); NaN fails the comparison.
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= top:
                raise ValueError(f"{name} must be a number in [0, {top}], got {_shown(value)}")
        for name, count in (
            ("model_plan_steps", self.model_plan_steps),
            ("effective_steps_self", self.effective_steps_self),
            ("effective_steps_ref", self.effective_steps_ref),
        ):
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_STEP_COUNT:
                raise ValueError(f"{name} must be an integer in [0, {MAX_STEP_COUNT}], got {_shown(count)}")
        if self.effective_steps_self > self.model_plan_steps:
            raise ValueError(
                f"effective_steps_self ({self.effective_steps_self}) exceeds model_plan_steps "
                f"({self.model_plan_steps})"
            )


def _shown(value: object) -> str:
    """A short ``repr`` for an error message: a 400-digit int is not echoed whole (nor past Python's digit limit)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return "an integer too large"
    try:
        shown = repr(value)
    except (RecursionError, ValueError):
        return f"a {type(value).__name__} too large to show"
    return shown if len(shown) <= 60 else f"{shown[:59]}…"


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0  # the paper is silent on 0/0: 0 (as the vectors)


def _efficiency(n_effective: int, n_actions: int) -> float:
    """n_effective / n_actions (§3.2.2), capped at 1 (module docstring)."""
    return min(1.0, _ratio(n_effective, n_actions))


def self_consistency_score(r_planner: float, n_exec_self: int, n_plan: int, n_actions: int) -> float:
    """Track A, Eq. 6: plan quality × plan completion × efficiency.

    >>> self_consistency_score(1.0, 2, 2, 3)
    0.6666666666666666
    """
    return r_planner * _ratio(n_exec_self, n_plan) * _efficiency(n_exec_self, n_actions)


def self_consistency_score_alg3(
    planner_score: float, effective_steps_self: int, model_plan_steps: int
) -> float:
    """Track A as Algorithm 3 line 15 computes it: without Eq. 6's efficiency ratio."""
    return planner_score * _ratio(effective_steps_self, model_plan_steps)


def reference_alignment_score(n_covered: int, n_ref: int, n_actions: int) -> float:
    """Track B, Eq. 7: order-agnostic coverage of the reference path × efficiency.

    >>> reference_alignment_score(1, 2, 2)
    0.25
    """
    return _ratio(n_covered, n_ref) * _efficiency(n_covered, n_actions)


def reference_alignment_score_alg3(effective_steps_ref: int, n_ref_steps: int) -> float:
    """Track B as Algorithm 3 line 18 computes it: without Eq. 7's efficiency ratio."""
    return _ratio(effective_steps_ref, n_ref_steps)


def path_reward(s_self: float, s_ref: float) -> float:
    """R_path = max(S_self, S_ref) (§3.2.2): the stronger track is not diluted by the weaker one."""
    return max(s_self, s_ref)


def soft_outcome_reward(correct: bool, r_acc: float, r_reason: float, alpha: float = ALPHA) -> float:
    """Eq. 8: 1 for a correct answer, else partial credit from the evaluator's accuracy and reasoning scores.

    >>> soft_outcome_reward(False, 0.5, 1.0)
    0.6
    """
    if correct:
        return 1.0
    return alpha * r_acc + (1 - alpha) * r_reason


def format_reward(facts: SearchP1FormatFacts) -> float | None:
    """Algorithm 3 lines 2–7: 0.1, 0.05, or ``None`` when the trajectory is invalid (its whole reward is 0)."""
    if facts.valid_format and facts.has_answer and facts.has_tool_call:
        return FORMAT_FULL
    if facts.has_answer and facts.has_tool_response:
        return FORMAT_SOFT
    return None


def searchp1_reward_from_parts(
    *,
    facts: SearchP1FormatFacts,
    evaluation: SearchP1Evaluation | None,
    n_actions: int,
    n_ref_steps: int,
    correct: bool,
    variant: Variant = "main",
    weights: SearchP1Weights = SearchP1Weights(),  # frozen, so a shared default is safe
) -> Reward:
    """R_total (Eq. 4 / Algorithm 3) from the trajectory's format facts and counts and the evaluator's outcome.

    ``evaluation`` may be ``None`` only when the format is invalid: Algorithm 3 returns 0 before calling the
    evaluator. Components: ``R_format`` (always), then ``S_self``, ``S_ref``, ``R_path``, ``R_outcome``.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown Search-P1 variant {variant!r}; known: {', '.join(VARIANTS)}")
    r_format = format_reward(facts)
    if r_format is None:
        return Reward(total=0.0, components={"R_format": 0.0})  # Algorithm 3, line 7
    if evaluation is None:
        raise MissingVerdict(
            "Search-P1 needs the dual-track evaluation of this trajectory, and it is missing"
        )
    if evaluation.effective_steps_ref > n_ref_steps:
        raise MissingVerdict(
            f"the evaluator counted {evaluation.effective_steps_ref} covered reference steps, "
            f"but the reference path has {n_ref_steps}"
        )
    if variant == "main":
        s_self = self_consistency_score(
            evaluation.planner_score, evaluation.effective_steps_self, evaluation.model_plan_steps, n_actions
        )
        s_ref = reference_alignment_score(evaluation.effective_steps_ref, n_ref_steps, n_actions)
    else:
        s_self = self_consistency_score_alg3(
            evaluation.planner_score, evaluation.effective_steps_self, evaluation.model_plan_steps
        )
        s_ref = reference_alignment_score_alg3(evaluation.effective_steps_ref, n_ref_steps)
    r_path = path_reward(s_self, s_ref)
    r_outcome = soft_outcome_reward(
        correct, evaluation.outcome_accuracy_score, evaluation.outcome_reasoning_score, weights.alpha
    )
    w = weights
    if variant == "main":  # Eq. 4's order of terms
        total = w.lambda_p * r_path + w.lambda_a * r_outcome + w.lambda_f * r_format
    else:  # Algorithm 3 line 29's order
        total = w.lambda_f * r_format + w.lambda_p * r_path + w.lambda_a * r_outcome
    return Reward(
        total=total,
        components={
            "R_format": r_format,
            "S_self": s_self,
            "S_ref": s_ref,
            "R_path": r_path,
            "R_outcome": r_outcome,
        },
    )


def searchp1_reward(
    trajectory: Trajectory,
    golden_answers: str | Iterable[str],
    evaluation: SearchP1Evaluation | None,
    *,
    n_ref_steps: int,
    variant: Variant = "main",
    weights: SearchP1Weights = SearchP1Weights(),  # frozen, so a shared default is safe
) -> Reward:
    """Search-P1's total reward for a parsed trajectory (:func:`scoring.formats.searchp1.parse_searchp1`).

    ``n_ref_steps`` is |R_ref|, the number of steps of the question's reference path
    (:func:`scoring.judging.searchp1.parse_reference_planner`). ``evaluation`` is the evaluator's parsed reply;
    ``None`` (missing, unparseable or failed) raises :class:`~scoring.verdicts.MissingVerdict` unless the
    trajectory's format already makes its reward 0.
    """
    answer = trajectory.answer
    return searchp1_reward_from_parts(
        facts=searchp1_format_facts(trajectory),
        evaluation=evaluation,
        n_actions=trajectory.n_searches,
        n_ref_steps=n_ref_steps,
        correct=answer is not None and exact_match(answer, golden_answers),
        variant=variant,
        weights=weights,
    )
