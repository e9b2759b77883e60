"""How the rewards of a GRPO group relate: whether they differ at all (:func:`has_spread`; without spread every
group-normalised advantage is 0) and whether the process term changes their order (:func:`group_metrics`' ``groups/*``
metrics, logged per training step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scoring.rewards.result import Reward

if TYPE_CHECKING:
    from trainer.rewards import SampleScore


def outcome_only_total(method: str, reward: Reward) -> float | None:
    """The reward without its process term, to see what the process term changes; ``None`` where the method's
    outcome part is not separable from its components here.

    HiPRAG: Eq. 1 with λp = 0, R − λp·A·F·N_corr/N (the ``process_bonus`` component; HiPRAG Table 2's baseline).
    TIRESRAG-R1: R_A, the answer reward without a_t·(auxiliary rewards) (Eq. 5). Search-R1: the reward itself
    (it has no process term).
    """
    if method == "hiprag":
        return reward.total - reward.components.get("process_bonus", 0.0)
    if method == "tiresrag" and "answer" in reward.components:
        return reward.components["answer"]
    if method == "search_r1":
        return reward.total
    return None


def _order(values: Sequence[float], tolerance: float = 1e-9) -> list[int]:
    """Sign of every pairwise difference (i < j): −1, 0 (a tie, within ``tolerance``) or 1."""
    return [
        0 if abs(a - b) <= tolerance else (1 if a > b else -1)
        for i, a in enumerate(values)
        for b in values[i + 1 :]
    ]


def has_spread(totals: Sequence[float | None]) -> bool:
    """Whether a GRPO group's rewards differ: at least two scored rollouts with different totals (unscored ones,
    ``None``, take no part, as in TRL's group baseline). Without spread every group-normalised advantage is 0.

    >>> has_spread([0.2, 0.2, None]), has_spread([0.2, 1.0])
    (False, True)
    """
    return any(sign != 0 for sign in _order([t for t in totals if t is not None]))


def group_metrics(method: str, scores: Sequence[SampleScore], group_size: int) -> dict[str, float]:
    """Per training step, over the GRPO groups of a generation batch (consecutive runs of ``group_size``):

    * ``groups/spread_rate`` — share of groups whose rewards are not all equal (at least two scored rollouts with
      different totals). A group without spread has all-zero group-normalised advantages: no gradient.
    * ``groups/process_reordered_rate`` — share of groups where the process term changed the group's order: some
      pair of scored rollouts compares differently (<, =, >) by the full reward than by the outcome-only reward
      (:func:`outcome_only_total`). HiPRAG's gated bonus never flips an outcome order (1 + bonus > 1 − λf), so
      there this counts the groups where it breaks an outcome tie — the only way λp reaches the advantages.
      Logged only for methods with an outcome-only reward.

    Unscorable rollouts (no reward) take part in neither order, as they take no part in TRL's group baseline.
    """
    size = max(int(group_size), 1)
    groups = [scores[i : i + size] for i in range(0, len(scores), size)]
    if not groups:
        return {}
    spread = reordered = 0
    separable = True
    for group in groups:
        rewards = [s.reward for s in group if s.reward is not None]
        totals = [r.total for r in rewards]
        spread += has_spread(totals)
        outcome = [outcome_only_total(method, r) for r in rewards]
        if any(o is None for o in outcome):
            separable = False
            continue
        reordered += _order(totals) != _order([o for o in outcome if o is not None])
    metrics = {"groups/spread_rate": spread / len(groups)}
    if separable:
        metrics["groups/process_reordered_rate"] = reordered / len(groups)
    return metrics
