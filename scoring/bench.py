"""Throughput of parse + format check + reward, per method, on generated trajectories (one core).

    python -m scoring.bench [--n 10000] [--released PATH]

Each method's row times the whole path a trainer's reward call takes: parse the response text (which runs the
format check), then compute the paper-mode reward from the parsed trajectory, the gold answers and judge outcomes
(judge outcomes are inputs: here generated verdicts, since scoring never calls a judge). ``--released`` names a
Python file holding the HiPRAG authors' released reward functions (kept outside this repository; see
docs/benchmarks.md), timed on the same inputs for comparison.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from scoring.formats import parse
from scoring.synthetic import SyntheticTrajectory, generate
from scoring.trajectory import Trajectory
from scoring.verdicts import Verdict

Scorer = Callable[[SyntheticTrajectory, Trajectory, "Judged"], float]


@dataclass(frozen=True, slots=True)
class Judged:
    """Generated judge outcomes for one trajectory: one verdict per step (about 1 in 5 flagged)."""

    step_flags: tuple[Verdict, ...]


def _judge(rng: random.Random, n_steps: int) -> Judged:
    return Judged(tuple(Verdict.TRUE if rng.random() < 0.2 else Verdict.FALSE for _ in range(n_steps)))


def _hiprag(item: SyntheticTrajectory, trajectory: Trajectory, judged: Judged) -> float:
    from scoring.rewards.hiprag import hiprag_reward

    flags = judged.step_flags[: len(trajectory.steps)]
    flags += (Verdict.FALSE,) * (len(trajectory.steps) - len(flags))
    return hiprag_reward(trajectory, item.golds, flags).total


def _searchr1(item: SyntheticTrajectory, trajectory: Trajectory, judged: Judged) -> float:
    from scoring.rewards.searchr1 import searchr1_format_reward

    return searchr1_format_reward(trajectory, item.golds).total


def _autosearch(item: SyntheticTrajectory, trajectory: Trajectory, judged: Judged) -> float:
    from scoring.rewards.autosearch import autosearch_reward

    # one self-answer per retrieval step: the gold from the second step on, so t_c varies
    answers = [item.golds[0] if i else "unknown" for i in range(max(len(trajectory.steps) - 1, 0))]
    return autosearch_reward(trajectory, item.golds, answers).total


def _searchp1(item: SyntheticTrajectory, trajectory: Trajectory, judged: Judged) -> float:
    from scoring.rewards.searchp1 import SearchP1Evaluation, searchp1_reward

    plan = max(len(trajectory.plan), 1)
    evaluation = SearchP1Evaluation(0.8, plan, min(plan, trajectory.n_searches), 1, 0.5, 0.5)
    return searchp1_reward(trajectory, item.golds, evaluation, n_ref_steps=2).total


def _tiresrag(item: SyntheticTrajectory, trajectory: Trajectory, judged: Judged) -> float:
    from scoring.rewards.tiresrag import tiresrag_reward

    sufficiency = judged.step_flags[0] if judged.step_flags else Verdict.FALSE
    return tiresrag_reward(
        trajectory, item.golds, sufficiency=sufficiency, thinking=0.7, step=10, total_steps=100
    ).total


METHODS: dict[str, tuple[str, Scorer]] = {
    "hiprag": ("hiprag", _hiprag),
    "search_r1": ("search_r1", _searchr1),
    "autosearch": ("autosearch", _autosearch),
    "search_p1": ("search_p1", _searchp1),
    "tiresrag": ("tiresrag", _tiresrag),
}


@dataclass(frozen=True, slots=True)
class Row:
    method: str
    n: int
    parse_seconds: float
    total_seconds: float

    @property
    def per_second(self) -> float:
        return self.n / self.total_seconds


def time_method(method: str, items: list[SyntheticTrajectory], judged: list[Judged]) -> Row:
    format_name, scorer = METHODS[method]
    start = time.perf_counter()
    for item in items:
        parse(format_name, item.text)
    parse_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for item, judgement in zip(items, judged, strict=True):
        scorer(item, parse(format_name, item.text), judgement)
    return Row(method, len(items), parse_seconds, time.perf_counter() - start)


def time_released_hiprag(module: ModuleType, items: list[SyntheticTrajectory], judged: list[Judged]) -> float:
    """Seconds for the released compute_score_em path (format check, step split, reward) on the same inputs."""
    start = time.perf_counter()
    for item, judgement in zip(items, judged, strict=True):
        flags = [flag is Verdict.TRUE for flag in judgement.step_flags]
        module.compute_score_em_sync(item.text, list(item.golds), flags, flags, structure_format_score=0.2)
    return time.perf_counter() - start


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("released_hiprag", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10_000, help="trajectories per method (default 10,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--released", type=Path, help="a file with HiPRAG's released reward functions")
    parser.add_argument("--method", choices=sorted(METHODS), action="append", help="only these methods")
    args = parser.parse_args(argv)

    print(f"{'method':<12} {'trajectories':>12} {'parse/s':>10} {'parse+reward/s':>15}")
    for method in args.method or list(METHODS):
        items = generate(METHODS[method][0], args.n, seed=args.seed)
        rng = random.Random(args.seed)
        judged = [_judge(rng, len(item.step_kinds)) for item in items]
        row = time_method(method, items, judged)
        print(f"{row.method:<12} {row.n:>12,} {row.n / row.parse_seconds:>10,.0f} {row.per_second:>15,.0f}")
        if method == "hiprag" and args.released:
            seconds = time_released_hiprag(_load(args.released), items, judged)
            print(f"{'  released':<12} {row.n:>12,} {'':>10} {row.n / seconds:>15,.0f}  (HiPRAG's own code)")
            # Machines differ 3× from day to day; the ratio to a baseline timed beside it in this process does not.
            print(
                f"{'  ratio':<12} {'':>12} {'':>10} {row.per_second * seconds / row.n:>14.2f}×  ours / released"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
