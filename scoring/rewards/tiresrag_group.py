"""TIRESRAG-R1's group-level optimisation, as the paper defines it (§4.4, Eqs. 6–7, Algorithm 1 lines 13–18).

For one question's group of G rollouts (each scored by :func:`scoring.rewards.tiresrag.tiresrag_reward`):

1. **Group filter** (Alg. 1 line 14, "0.1 < r^(a) < 0.9"): keep the group only when its mean answer reward lies
   strictly between 0.1 and 0.9 — saturated groups, "where all rollouts are either completely correct or completely
   wrong" (§4.4), are dropped. The condition is a single two-sided bound on the group's answer rewards, read here as
   on their mean (the accuracy filter this kind of bound comes from; REFERENCE.md §2.7.4). The literal "every r_i in
   (0.1, 0.9)" would drop any group containing one fully correct answer, the opposite of the stated intent. The
   released code drops only groups whose max ≤ 0.1 or min ≥ 0.9 (in float32): see ``tiresrag_reference_trainer``.
2. **Advantage** A_i = (R_i^sum − mean) / std over the group (Alg. 1 line 15), with the *population* std (1/G),
   as the algorithm writes it.
3. **Consistency penalty** (Eq. 7): A_i^P = −λ_p · A_i^S · A_i^T · A_i^A when that product is negative, else 0, with
   A^S, A^T, A^A the group-normalised sufficiency, thinking and answer rewards. (Eq. 7 prints "A_i^T · A_i^T · A_i^A"
   but conditions on A_i^S · A_i^T · A_i^A and defines all three: the first T is a typo for S.) So A_i^P ≥ 0.
   As written, the product is negative whenever an odd number of the three is below the group mean — one low (the
   inconsistency the paper targets) *or all three low*: a rollout worse than its group on every count is penalised
   too. We keep the equation as printed (the released code does the same).
4. **Difficulty weight** (Eq. 6): W(ρ) = A + (B − A) / (1 + exp(k(ρ − ρ0))), ρ = the group's mean sufficiency reward,
   A=0.4, B=1.5, ρ0=0.75, k=10 (Appendix C.1). W ∈ (0.4, 1.5): groups whose evidence is hard to retrieve weigh more.
5. **Shaped advantage** A'_i = (A_i − A_i^P) · W (§4.4, Alg. 1 line 17).

Silent in the paper, our choice: a group whose values are all equal has std 0; its normalised values are all 0
(no rollout is better than another), both for A_i and for the penalty's A^S, A^T, A^A. The group-normalised values
inside Eq. 7 use the same population std as A_i. Statistics come from :mod:`statistics` (``mean``, ``pstdev``,
computed exactly, so a constant group has a std of exactly 0).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scoring.rewards.result import Reward

GROUP_FILTER_LOWER = 0.1  # Alg. 1 line 14
GROUP_FILTER_UPPER = 0.9
PENALTY_LAMBDA = 0.1  # λ_p (Appendix C.1)


@dataclass(frozen=True, slots=True)
class DifficultyParams:
    """Eq. 6's hyper-parameters (Appendix C.1)."""

    low: float = 0.4  # A: the weight of the easiest groups
    high: float = 1.5  # B: the weight of the hardest groups
    rho0: float = 0.75
    k: float = 10.0


DEFAULT_DIFFICULTY = DifficultyParams()


@dataclass(frozen=True, slots=True)
class GroupAdvantages:
    """One group's shaping. ``advantages`` is empty when the group filter dropped the group."""

    kept: bool
    advantages: tuple[float, ...]
    normalized: tuple[float, ...]  # A_i
    penalties: tuple[float, ...]  # A_i^P ≥ 0
    difficulty: float  # W(ρ)
    rho: float  # mean sufficiency reward


def difficulty_weight(rho: float, params: DifficultyParams = DEFAULT_DIFFICULTY) -> float:
    """W(ρ) (Eq. 6), computed without overflow for any ρ.

    >>> round(difficulty_weight(0.75), 12)
    0.95
    """
    x = params.k * (rho - params.rho0)
    if x > 0:
        e = math.exp(-x)
        logistic = e / (1.0 + e)
    else:
        logistic = 1.0 / (1.0 + math.exp(x))
    return params.low + (params.high - params.low) * logistic


def group_normalize(values: Sequence[float]) -> list[float]:
    """(x − mean) / population std; all zeros when the std is 0 (Alg. 1 line 15).

    >>> group_normalize([1.0, 0.0])
    [1.0, -1.0]
    """
    if not values:
        raise ValueError("a group needs at least one rollout")
    # statistics.mean/pstdev work on exact fractions, so equal values give a std of exactly 0 (fmean of
    # [0.7] * 3 is 0.6999999999999998, which would turn a constant group into ±1 z-scores).
    mean = statistics.mean(values)
    std = statistics.pstdev(values)
    if std == 0.0:
        return [0.0] * len(values)
    return [(v - mean) / std for v in values]


def consistency_penalties(
    answer: Sequence[float],
    thinking: Sequence[float],
    sufficiency: Sequence[float],
    *,
    lambda_p: float = PENALTY_LAMBDA,
) -> list[float]:
    """A_i^P (Eq. 7) for every rollout of a group: −λ_p·A^S·A^T·A^A where that product is negative, else 0.

    >>> [round(p, 12) for p in consistency_penalties([1.0, 0.0], [0.2, 0.8], [1.0, 0.0])]
    [0.1, 0.0]
    """
    if not len(answer) == len(thinking) == len(sufficiency):
        raise ValueError("answer, thinking and sufficiency rewards must cover the same rollouts")
    products = (
        a * t * s
        for a, t, s in zip(
            group_normalize(answer), group_normalize(thinking), group_normalize(sufficiency), strict=True
        )
    )
    return [-lambda_p * p if p < 0 else 0.0 for p in products]


def keep_group(
    answer_rewards: Sequence[float], *, lower: float = GROUP_FILTER_LOWER, upper: float = GROUP_FILTER_UPPER
) -> bool:
    """The group filter (Alg. 1 line 14): keep iff lower < mean answer reward < upper (strict).

    >>> keep_group([1.0, 0.0, 1.0, 0.0, 1.0]), keep_group([1.0] * 5), keep_group([0.0] * 5)
    (True, False, False)
    """
    if not answer_rewards:
        raise ValueError("a group needs at least one rollout")
    return lower < statistics.mean(answer_rewards) < upper


def tiresrag_group_advantages(
    rewards: Sequence[Reward],
    *,
    lambda_p: float = PENALTY_LAMBDA,
    lower: float = GROUP_FILTER_LOWER,
    upper: float = GROUP_FILTER_UPPER,
    difficulty: DifficultyParams = DEFAULT_DIFFICULTY,
) -> GroupAdvantages:
    """Filter, normalise, penalise and reweight one question's rollouts (§4.4, Alg. 1 lines 13–18).

    ``rewards`` are :func:`scoring.rewards.tiresrag.tiresrag_reward` results: their ``total`` is R^sum and their
    ``answer``/``thinking``/``sufficiency`` components feed the filter, Eq. 7 and Eq. 6.
    """
    if not rewards:
        raise ValueError("a group needs at least one rollout")
    answer = [r.components["answer"] for r in rewards]
    thinking = [r.components["thinking"] for r in rewards]
    sufficiency = [r.components["sufficiency"] for r in rewards]
    rho = statistics.mean(sufficiency)
    weight = difficulty_weight(rho, difficulty)
    if not keep_group(answer, lower=lower, upper=upper):
        return GroupAdvantages(False, (), (), (), weight, rho)
    normalized = group_normalize([r.total for r in rewards])
    penalties = consistency_penalties(answer, thinking, sufficiency, lambda_p=lambda_p)
    advantages = tuple((a - p) * weight for a, p in zip(normalized, penalties, strict=True))
    return GroupAdvantages(True, advantages, tuple(normalized), tuple(penalties), weight, rho)
