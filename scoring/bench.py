"""Throughput of parse + format check + reward, per method, on generated trajectories (one core).

    python -m scoring.bench [--n 10000] [--released PATH]

Each method's row times the whole path a trainer's reward call takes, :func:`scoring.scorer.score_batch`: parse each
response text (which runs the format check), read the weights and judge outcomes, then compute the paper-mode reward
(judge outcomes are inputs: here the ones the method's ``scoring.scorer.METHODS`` entry simulates from generated
verdicts, since scoring never calls a judge). ``--released`` names a Python file holding the HiPRAG authors' released
reward functions (kept outside this repository; see docs/benchmarks.md), timed on the same inputs for comparison.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from scoring.formats import parse
from scoring.scorer import METHODS, BatchItem, score_batch
from scoring.synthetic import SyntheticTrajectory, generate
from scoring.verdicts import Verdict


@dataclass(frozen=True, slots=True)
class Judged:
    """Generated judge outcomes for one trajectory: one verdict per step (about 1 in 5 flagged)."""

    step_flags: tuple[Verdict, ...]


def _judge(rng: random.Random, n_steps: int) -> Judged:
    return Judged(tuple(Verdict.TRUE if rng.random() < 0.2 else Verdict.FALSE for _ in range(n_steps)))


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
    """Seconds to parse the items, and to score them as a trainer does (one :func:`scoring.scorer.score_batch`,
    default weights), with the judge outcomes the method's entry simulates from the generated verdicts."""
    spec = METHODS[method]
    start = time.perf_counter()
    trajectories = [parse(spec.format, item.text) for item in items]
    parse_seconds = time.perf_counter() - start
    batch = [
        BatchItem(
            item.text,
            item.golds,
            spec.simulated_judgements(
                trajectory, item.golds, [flag is Verdict.TRUE for flag in judgement.step_flags]
            ),
        )
        for item, trajectory, judgement in zip(items, trajectories, judged, strict=True)
    ]
    start = time.perf_counter()
    score_batch(method, batch)
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
        items = generate(METHODS[method].format, args.n, seed=args.seed)
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
