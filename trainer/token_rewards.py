"""Per-step rewards placed on tokens, and the GRPO advantages they give.

AutoSearch rewards every turn (``Reward.step_rewards``, one per step, the terminal step last). Its released trainer
writes each turn's reward on the last token of that turn's response and the final one on the last valid token
(REFERENCE.md §b "Per-turn token rewards"). Here a *turn end* is the last policy token of each maximal run of policy
tokens in the completion: a turn is what the policy wrote before the environment answered, and the completion's last
policy token ends the terminal turn.

Methods with one trajectory-level reward place it on the last policy token (Search-R1: "reward is written to the last
valid response token").
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def turn_ends(env_mask: Sequence[int]) -> list[int]:
    """Indices of the last policy token of every run of policy tokens.

    >>> turn_ends([1, 1, 0, 0, 1, 0, 1, 1])
    [1, 4, 7]
    """
    ends = [i for i, m in enumerate(env_mask) if m and (i + 1 == len(env_mask) or not env_mask[i + 1])]
    return ends


@dataclass(frozen=True, slots=True)
class Placement:
    """Where each step's reward went. ``aligned`` is False when the steps and the turns did not match one to one."""

    positions: tuple[int, ...]  # one token index per step reward
    aligned: bool


def step_positions(n_steps: int, env_mask: Sequence[int]) -> Placement:
    """The token each of ``n_steps`` step rewards lands on.

    Step i goes to turn end i; the terminal step always goes to the last policy token. When the parser found a
    different number of steps than there are turns (a malformed turn the parser merged or split), the leading steps
    keep their turn ends as far as they reach and every surplus step goes to the last policy token, so no reward is
    dropped; ``aligned`` is False so the trainer can count it.

    >>> step_positions(3, [1, 1, 0, 1, 0, 1])
    Placement(positions=(1, 3, 5), aligned=True)
    >>> step_positions(3, [1, 0, 1])
    Placement(positions=(0, 2, 2), aligned=False)
    """
    ends = turn_ends(env_mask)
    if not ends:
        raise ValueError("a completion without policy tokens has no turn to reward")
    if n_steps == 0:
        return Placement((), True)
    last = ends[-1]
    positions = [ends[i] if i < len(ends) - 1 else last for i in range(n_steps - 1)]
    positions.append(last)
    return Placement(tuple(positions), n_steps == len(ends))


def token_rewards(step_rewards: Sequence[float], env_mask: Sequence[int]) -> tuple[list[float], bool]:
    """A reward per completion token: each step's reward on its turn end, 0 elsewhere (sums where steps share one).

    >>> token_rewards([0.1, 1.1], [1, 0, 0, 1, 1])
    ([0.1, 0.0, 0.0, 0.0, 1.1], True)
    """
    placement = step_positions(len(step_rewards), env_mask)
    rewards = [0.0] * len(env_mask)
    for position, reward in zip(placement.positions, step_rewards, strict=True):
        rewards[position] += reward
    return rewards, placement.aligned


def outcome_token_rewards(total: float, env_mask: Sequence[int]) -> list[float]:
    """One trajectory-level reward on the last policy token.

    >>> outcome_token_rewards(1.0, [1, 1, 0])
    [0.0, 1.0, 0.0]
    """
    rewards = [0.0] * len(env_mask)
    rewards[turn_ends(env_mask)[-1]] = total
    return rewards


def group_step_stats(group_step_rewards: Sequence[Sequence[float] | None]) -> tuple[float, float]:
    """Mean and population std of every step reward of a group (DeepSeekMath §4.1.3's normalisation statistics).

    >>> group_step_stats([[1.0, 0.0], None, [0.0, 1.0]])
    (0.5, 0.5)
    """
    pooled = [r for rewards in group_step_rewards if rewards for r in rewards]
    mean = statistics.fmean(pooled) if pooled else 0.0
    std = statistics.pstdev(pooled) if len(pooled) > 1 else 0.0
    return mean, std


def step_advantages(
    step_rewards: Sequence[float] | None, env_mask: Sequence[int], mean: float, std: float
) -> tuple[list[float], bool]:
    """Token advantages of one rollout under process supervision: Â_t = Σ_{steps j ending at or after t} r̃_j with
    r̃ = (r − mean) / std; environment tokens get 0 (they are out of the loss anyway). A rollout without step rewards
    (unscorable), or a group whose step rewards are all equal (std 0), gets zeros, as an outcome group would."""
    advantages = [0.0] * len(env_mask)
    if not step_rewards or std <= 0:
        return advantages, True
    placed, aligned = token_rewards([(r - mean) / std for r in step_rewards], env_mask)
    running = 0.0
    for t in range(len(env_mask) - 1, -1, -1):
        running += placed[t]
        advantages[t] = running if env_mask[t] else 0.0
    return advantages, aligned


def process_supervision_advantages(
    group_step_rewards: Sequence[Sequence[float] | None], group_env_masks: Sequence[Sequence[int]]
) -> list[list[float]]:
    """GRPO with process supervision (DeepSeekMath §4.1.3) for one group of rollouts: every step reward is
    normalised with the group's step-reward mean and std, and a token's advantage is the sum of the normalised
    rewards of the steps that end at or after it.

    >>> [[round(a, 4) for a in row] for row in process_supervision_advantages([[1.0, 0.0], [0.0]], [[1, 0, 1], [1]])]
    [[0.7071, 0.0, -0.7071], [-0.7071]]
    """
    mean, std = group_step_stats(group_step_rewards)
    return [
        step_advantages(rewards, mask, mean, std)[0]
        for rewards, mask in zip(group_step_rewards, group_env_masks, strict=True)
    ]
