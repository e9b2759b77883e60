"""What every reward function returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Reward:
    """A reward and its parts.

    ``total`` is what the trainer optimises. ``components`` holds the named terms the paper defines (for plots and
    audits). ``step_rewards`` holds per-step (per-turn) rewards for methods that place rewards on several tokens
    (AutoSearch); it is empty for methods with one trajectory-level reward.
    """

    total: float
    components: Mapping[str, float] = field(default_factory=dict)
    step_rewards: tuple[float, ...] = ()
