"""Benchmark of dynamic sampling's spare groups (``training.dynamic_sampling_spare_groups``): rollout calls made one
after another per step, against the groups generated, for a simulated share of groups with reward spread.

Each question's group has spread with probability ``--spread`` (drawn afresh per question and step, seeded), and the
real :class:`trainer.dynamic_sampling.DynamicSampler` fills a batch of ``--questions`` groups with ``max_draws``
rounds (2, the default) and 0, 1, 2 or 4 spare groups. Per setting it prints, over ``--steps`` steps:

* ``calls``: rollout calls per step, one after another (the batch's, spares included, then each round's). On a GPU a
  135M policy's generation is launch-bound, so a call's wall time depends little on how many groups it holds and
  the step time follows the calls;
* ``>1 call``: share of steps that needed a sequential round;
* ``groups``: groups generated per step (batch, spares and rounds), the cost in rollouts (× ``num_generations``);
* ``spread``: share of trained groups with spread (what the sampling is for), ``spares used``/``dropped`` per step.

    .venv/bin/python bench/dynamic_sampling_calls.py
    .venv/bin/python bench/dynamic_sampling_calls.py --spread 0.3 0.5 --questions 1 4 8 --steps 4000
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from trainer.dynamic_sampling import DynamicSampler  # noqa: E402
from trainer.rewards import ScoreLedger, has_spread  # noqa: E402
from trainer.rollout import Rollout, RolloutRequest, Segment  # noqa: E402

GROUP = 2  # rollouts per question: enough for spread or none; the counts do not depend on it
POOL = 2000  # training questions to draw from


class _Simulated:
    """Rollout and scorer at once: a group has spread with probability ``spread``, per question and step."""

    def __init__(self, spread: float, seed: int) -> None:
        self.spread, self.seed = spread, seed
        self.step = 0
        self.calls = 0
        self.groups = 0

    def __call__(self, requests: Sequence[RolloutRequest], policy: Any) -> list[Rollout]:
        self.calls += 1
        self.groups += len(requests) // GROUP
        return [Rollout((1,), (Segment((2,), True),), r.prompt) for r in requests]

    def score(
        self, requests: Sequence[RolloutRequest], rollouts: Sequence[Rollout], state: Any
    ) -> list[float | None]:
        totals: list[float | None] = []
        for i, request in enumerate(requests):
            draw = random.Random(f"{self.seed}:{self.step}:{request.prompt}").random()
            totals.append(float(i % 2) if draw < self.spread else 0.0)
        return totals


def simulate(spread: float, questions: int, spares: int, steps: int, max_draws: int) -> dict[str, float]:
    rows = [{"prompt": f"q{i}"} for i in range(POOL)]
    sim = _Simulated(spread, seed=0)
    ledger = ScoreLedger()
    sampler = DynamicSampler(
        sim.score, rows, group_size=GROUP, max_draws=max_draws, seed=0, ledger=ledger, spare_groups=spares
    )
    picker = random.Random(1)
    calls, groups, spread_after, used, dropped = [], [], [], [], []
    for step in range(steps):
        sim.step, sim.calls, sim.groups = step, 0, 0
        batch = picker.sample(range(POOL), questions)
        requests = [
            RolloutRequest(f"q{q}", rows[q], k * GROUP + j) for k, q in enumerate(batch) for j in range(GROUP)
        ]
        kept, rollouts = sampler.sample(requests, sim, None, state=SimpleNamespace(global_step=step))
        totals = sim.score(kept, rollouts, None)
        calls.append(sim.calls)
        groups.append(sim.groups)
        spread_after.append(
            sum(has_spread(totals[k * GROUP : (k + 1) * GROUP]) for k in range(questions)) / questions
        )
        used.append(ledger.sampling["groups/spare_groups_used"])
        dropped.append(ledger.sampling["groups/spare_groups_dropped"])
    return {
        "calls": statistics.fmean(calls),
        "more_than_one": sum(c > 1 for c in calls) / steps,
        "groups": statistics.fmean(groups),
        "spread": statistics.fmean(spread_after),
        "used": statistics.fmean(used),
        "dropped": statistics.fmean(dropped),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spread", type=float, nargs="+", default=[0.3, 0.5, 0.67, 0.83])
    parser.add_argument("--questions", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--spares", type=int, nargs="+", default=[0, 1, 2, 4])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--max-draws", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"{args.steps} steps a setting, max_draws {args.max_draws}; per step:")
    print(
        "| spread | questions | spares | calls | >1 call | groups | spread trained | spares used | dropped |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for spread in args.spread:
        for questions in args.questions:
            for spares in args.spares:
                r = simulate(spread, questions, spares, args.steps, args.max_draws)
                print(
                    f"| {spread:.2f} | {questions} | {spares} | {r['calls']:.2f} | {r['more_than_one']:.0%} | "
                    f"{r['groups']:.2f} | {r['spread']:.2f} | {r['used']:.2f} | {r['dropped']:.2f} |"
                )


if __name__ == "__main__":
    main()
