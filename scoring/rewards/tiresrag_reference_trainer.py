"""TIRESRAG-R1's trainer-side reward shaping as released (OpenRLHF-RAG in probe2/TIRESRAG-R1 @ a457873).

``experience_maker.py``: ``NaiveExperienceMaker.filter`` (L759-816) and ``process_experiences`` (L859-878);
``models/utils.py``: ``compute_reward``. The trainer keeps every per-sample value in float32 tensors, so these
functions round to float32 after each operation (:func:`f32`, a ``struct`` round trip). Torch's own reduction order
for small rows is followed (:func:`_torch_row_sum`); the results match the recorded torch outputs to ~1e-6 relative
(``APPROXIMATE`` in the conformance adapters), not bit for bit.

Differences from the paper (REFERENCE.md §2.4–2.5, §2.7.3–4):

* The filter drops a group only when its max F1 ≤ 0.1 (all wrong) or its min F1 ≥ 0.9 (all correct), comparing
  float32 values with float64 bounds, so an F1 of exactly 0.1 or 0.9 keeps its group.
* The advantage divides by torch's *unbiased* std + 1e-9 (the paper's Alg. 1 uses the population std), then
  subtracts the penalty and multiplies by W; ``compute_reward`` clamps it to ``reward_clip_range`` and puts it on the
  response's last token.

One experience is one sample here (``micro_rollout_batch_size`` 1, as in the released scripts), so ``len(experiences)``
in the logged ratios is the number of samples.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.rewards.tiresrag_reference import JudgeServerReply, MathRuleProxyReference

_F32 = struct.Struct("<f")


def f32(x: float) -> float:
    """Round a float64 to the nearest float32 (the value ``torch.tensor(x, dtype=torch.float32).item()`` gives)."""
    try:
        return float(_F32.unpack(_F32.pack(x))[0])
    except OverflowError:  # beyond float32's range: a float32 cast gives ±inf, struct refuses
        return math.copysign(math.inf, x)


def _torch_rows(values: Sequence[float], n: int) -> list[list[float]]:
    """``tensor.reshape(-1, n)`` of a flat float32 tensor."""
    if n <= 0 or len(values) % n:
        # Reproduces torch's reshape failure (the trainer never checks divisibility).
        raise RuntimeError(f"shape '[-1, {n}]' is invalid for input of size {len(values)}")
    return [[f32(v) for v in values[i : i + n]] for i in range(0, len(values), n)]


def _torch_row_sum(row: Sequence[float]) -> float:
    """ATen's CPU float32 ``row_sum``: four interleaved float32 accumulators, the tail added to the first, then the
    four combined in order. (Rows of 8+ take a vectorised path; this order is then an approximation.)"""
    partial = [0.0, 0.0, 0.0, 0.0]
    whole = len(row) // 4 * 4
    for i in range(0, whole, 4):
        for k in range(4):
            partial[k] = f32(partial[k] + row[i + k])
    for x in row[whole:]:
        partial[0] = f32(partial[0] + x)
    total = partial[0]
    for k in range(1, 4):
        total = f32(total + partial[k])
    return total


def _torch_mean(row: Sequence[float]) -> float:
    return f32(_torch_row_sum(row) / len(row))


def _torch_std_unbiased(row: Sequence[float]) -> float:
    """``tensor.std(-1)`` (Bessel-corrected): accumulated in float64, rounded to float32; NaN for one element."""
    n = len(row)
    if n < 2:
        return math.nan
    mean = math.fsum(row) / n
    return f32(math.sqrt(math.fsum((x - mean) ** 2 for x in row) / (n - 1)))


def _torch_row_max(row: Sequence[float]) -> float:
    return math.nan if any(math.isnan(x) for x in row) else max(row)


def _torch_row_min(row: Sequence[float]) -> float:
    return math.nan if any(math.isnan(x) for x in row) else min(row)


@dataclass(frozen=True, slots=True)
class FilterResult:
    kept_indices: list[int]  # sample indices of the groups kept, in order
    wandb_log: dict[str, float]


def filter_groups_reference(
    answer_rewards: Sequence[float],
    n_samples_per_prompt: int,
    *,
    accuracy_lower_bound: float = 0.1,
    accuracy_upper_bound: float = 0.9,
) -> FilterResult:
    """``NaiveExperienceMaker.filter`` on the per-sample answer F1 (``纯answer分数``, not the total reward).

    Drops a group when ``max.item() <= lower`` or ``min.item() >= upper`` with float32 maxima/minima, so F1 = 0.1
    exactly (float32 0.10000000149) and F1 = 0.9 exactly (float32 0.89999998) are both KEPT.
    """
    if not answer_rewards:
        # Reproduces torch.cat over an empty experience list.
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    groups = _torch_rows(answer_rewards, n_samples_per_prompt)
    kept: list[int] = []
    dropped_low = dropped_high = 0  # the source's max_count / min_count
    for g, row in enumerate(groups):
        if _torch_row_max(row) <= accuracy_lower_bound:
            dropped_low += n_samples_per_prompt
        elif _torch_row_min(row) >= accuracy_upper_bound:
            dropped_high += n_samples_per_prompt
        else:
            kept.extend(range(g * n_samples_per_prompt, (g + 1) * n_samples_per_prompt))
    total = len(answer_rewards)
    return FilterResult(
        kept,
        {
            "train/filtered_>0.9_experience": dropped_high / total,
            "train/filtered_<0.1_experience": dropped_low / total,
            "train/(max-min)<0.1_experience": 0 / total,  # its counter is never incremented
        },
    )


def process_experiences_reference(
    rewards: Sequence[float],
    difficulty: Sequence[float],
    penalty: Sequence[float],
    n_samples_per_prompt: int,
    advantage_estimator: str = "group_norm",
) -> list[float]:
    """``NaiveExperienceMaker.process_experiences`` → the per-sample shaped reward (float32 values).

    * ``group_norm`` (training): ``((R − mean) / (std_unbiased + 1e-9) − penalty) · W``;
    * ``reinforce_baseline``: ``(R − mean) − penalty`` (no W, no std);
    * ``rloo``: ``R − (sum − R)/(n − 1)`` (no penalty, no W);
    * anything else: the rewards unchanged.
    """
    if advantage_estimator not in ("group_norm", "reinforce_baseline", "rloo"):
        return [f32(r) for r in rewards]
    if not rewards:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    rows = _torch_rows(rewards, n_samples_per_prompt)
    shaped: list[float] = []
    if advantage_estimator == "rloo":
        for row in rows:
            total = _torch_row_sum(row)
            divisor = n_samples_per_prompt - 1
            for r in row:
                shaped.append(f32(r - f32(_ieee_divide(f32(total - r), divisor))))
        return shaped
    for row in rows:
        mean = _torch_mean(row)
        if advantage_estimator == "group_norm":
            denominator = f32(_torch_std_unbiased(row) + f32(1e-9))
            shaped.extend(f32(_ieee_divide(f32(r - mean), denominator)) for r in row)
        else:
            shaped.extend(f32(r - mean) for r in row)
    if len(penalty) != len(shaped) or (
        advantage_estimator == "group_norm" and len(difficulty) != len(shaped)
    ):
        # torch's broadcasting failure for per-sample tensors of different lengths
        raise RuntimeError("The size of tensor a must match the size of tensor b")
    if advantage_estimator == "reinforce_baseline":
        return [f32(a - f32(p)) for a, p in zip(shaped, penalty, strict=True)]
    return [f32(f32(a - f32(p)) * f32(w)) for a, p, w in zip(shaped, penalty, difficulty, strict=True)]


def _ieee_divide(numerator: float, denominator: float) -> float:
    """Division as torch does it: by zero gives ±inf or NaN (Python would raise ZeroDivisionError)."""
    if denominator != 0:
        return numerator / denominator
    if numerator == 0 or math.isnan(numerator):
        return math.nan
    return math.copysign(math.inf, numerator) * math.copysign(1.0, denominator)


def compute_reward_reference(
    r: Sequence[float],
    kl_coef: float,
    kl: Sequence[Sequence[float]],
    num_actions: Sequence[int],
    reward_clip_range: Sequence[float] | None = (-10.0, 10.0),
) -> list[list[float]]:
    """``compute_reward``, packed-sample path (``action_mask=None``) → per-token rewards per sample.

    The shaped reward is clamped to ``reward_clip_range`` and added to the KL reward ``−kl_coef·kl`` (kl_coef ≤ 0
    counts as 0; the script uses 0) at the sample's last action token.
    """
    coef = 0.0 if kl_coef <= 0.0 else kl_coef
    clipped = [f32(x) for x in r]
    if reward_clip_range:
        low, high = reward_clip_range[0], reward_clip_range[1]
        clipped = [x if math.isnan(x) else f32(min(max(x, low), high)) for x in clipped]
    rewards: list[list[float]] = []
    for i, (kl_seg, action_len) in enumerate(zip(kl, num_actions, strict=False)):
        token_rewards = [f32(-coef * f32(k)) for k in kl_seg]
        token_rewards[action_len - 1] = f32(token_rewards[action_len - 1] + clipped[i])
        rewards.append(token_rewards)
    return rewards


@dataclass(frozen=True, slots=True)
class CompositeResult:
    total_reward: list[Any]
    answer_f1: list[Any]
    difficulty: list[Any]
    penalty: list[Any]
    kept_indices: list[int]
    advantages_of_kept: list[float]


def reward_filter_advantages_reference(
    dataset: Sequence[Mapping[str, Any]],
    queries: Sequence[str],
    group_size: int,
    exit_flags: Sequence[Any] | None,
    global_step: float,
    total_training_steps: float,
    judge_reply: JudgeServerReply,
) -> CompositeResult:
    """One batch through the released pipeline: the reward server's ``get_reward``, then the trainer's filter on
    ``纯answer分数`` and ``group_norm`` ``process_experiences`` on the kept samples (n_samples_per_prompt =
    group_size)."""
    server = MathRuleProxyReference(dataset)
    rewards = server.get_reward(
        queries, group_size, exit_flags, total_training_steps, global_step, judge_reply
    ).rewards
    totals, f1s = rewards["总的分数"], rewards["纯answer分数"]
    difficulty, penalty = rewards["difficulty"], rewards["penalty"]
    kept = filter_groups_reference(f1s, group_size).kept_indices
    advantages = process_experiences_reference(
        [totals[i] for i in kept],
        [difficulty[i] for i in kept],
        [penalty[i] for i in kept],
        group_size,
    )
    return CompositeResult(totals, f1s, difficulty, penalty, kept, advantages)
