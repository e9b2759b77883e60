"""Coverage of the judge-corrected rate's 95% interval (``scoring.correct``) over simulated audits.

    python bench/correction_coverage.py [--sims 1000] [--n-boot 1000] [--scenario NAME ...] [--json PATH]

A judge of known sensitivity and specificity flags steps of a run whose true step rate θ is known. Each simulation
draws, independently:

* a **run** of ``--questions`` questions, each a trajectory of 1–4 judged steps; a trajectory's steps share a
  propensity drawn from Beta(θ·k, (1 − θ)·k) (k = 4: steps of one trajectory go wrong together, so clusters
  matter), each step is truly positive with that propensity and the judge flags it with probability ``se`` if it is,
  ``1 − sp`` if not;
* an **audit** of ``--audit`` trajectories (200) drawn the same way but from a population whose true rate is the
  audit's own (``audit_rate``: an audit is made once per judge version and serves other runs), with every step
  labelled by the humans (the truth) and by the judge.

``scoring.correct.corrected_rate`` then gives the raw rate with its interval (run sampling only) and the corrected
rate with its interval (run and audit). Printed per scenario: how often each interval covers θ (target 93–97% for
the corrected one), the mean corrected estimate and its bias, and the intervals' mean widths. With 1,000
simulations a coverage figure has a Monte Carlo standard error of about 0.7 points.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scoring.correct import AuditCounts, corrected_rate  # noqa: E402

CLUSTER_CONCENTRATION = 4.0


@dataclass(frozen=True)
class Scenario:
    name: str
    rate: float  # the run's true step rate θ
    audit_rate: float  # the audited population's true rate (the audit serves other runs)
    se: float
    sp: float


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("moderate", rate=0.10, audit_rate=0.25, se=0.85, sp=0.90),
        Scenario("common", rate=0.30, audit_rate=0.30, se=0.75, sp=0.85),
        Scenario("accurate", rate=0.15, audit_rate=0.30, se=0.95, sp=0.97),
        # HiPRAG's trained policy over-searches on 2.3% of steps: the clip at 0 matters here.
        Scenario("rare", rate=0.023, audit_rate=0.15, se=0.85, sp=0.97),
    )
}


def _trajectory(rng: random.Random, rate: float, se: float, sp: float) -> tuple[int, int, int, int]:
    """One trajectory's (tp, fp, fn, tn): judge = the test, truth = the humans."""
    propensity = rng.betavariate(rate * CLUSTER_CONCENTRATION, (1 - rate) * CLUSTER_CONCENTRATION)
    tp = fp = fn = tn = 0
    for _ in range(rng.randint(1, 4)):
        truth = rng.random() < propensity
        flagged = rng.random() < (se if truth else 1 - sp)
        if truth and flagged:
            tp += 1
        elif truth:
            fn += 1
        elif flagged:
            fp += 1
        else:
            tn += 1
    return tp, fp, fn, tn


def simulate(
    scenario: Scenario, *, sims: int, questions: int, audit_size: int, n_boot: int, seed: int
) -> dict:
    rng = random.Random(seed)
    covered = raw_covered = undefined = 0
    estimates: list[float] = []
    widths: list[float] = []
    raw_widths: list[float] = []
    for i in range(sims):
        run = []
        for _ in range(questions):
            tp, fp, fn, tn = _trajectory(rng, scenario.rate, scenario.se, scenario.sp)
            run.append((tp + fp, tp + fp + fn + tn))
        audit = [
            AuditCounts(*_trajectory(rng, scenario.audit_rate, scenario.se, scenario.sp))
            for _ in range(audit_size)
        ]
        result = corrected_rate(run, audit, n_boot=n_boot, seed=seed * 100_003 + i)
        assert result.raw_low is not None and result.raw_high is not None
        raw_covered += result.raw_low <= scenario.rate <= result.raw_high
        raw_widths.append(result.raw_high - result.raw_low)
        if result.corrected is None or result.low is None or result.high is None:
            undefined += 1
            continue
        covered += result.low <= scenario.rate <= result.high
        estimates.append(result.corrected)
        widths.append(result.high - result.low)
    mean = sum(estimates) / len(estimates) if estimates else float("nan")
    return {
        "scenario": scenario.name,
        "rate": scenario.rate,
        "audit_rate": scenario.audit_rate,
        "se": scenario.se,
        "sp": scenario.sp,
        "sims": sims,
        "questions": questions,
        "audit_trajectories": audit_size,
        "n_boot": n_boot,
        "corrected_coverage": covered / sims,
        "raw_coverage": raw_covered / sims,
        "undefined": undefined,
        "mean_corrected": mean,
        "bias": mean - scenario.rate,
        "mean_width": sum(widths) / len(widths) if widths else float("nan"),
        "mean_raw_width": sum(raw_widths) / len(raw_widths),
        "expected_raw": scenario.se * scenario.rate + (1 - scenario.sp) * (1 - scenario.rate),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=1000, help="simulated audits per scenario (default 1000)")
    parser.add_argument(
        "--n-boot", type=int, default=1000, help="bootstrap resamples per interval (default 1000)"
    )
    parser.add_argument(
        "--questions", type=int, default=500, help="run questions per simulation (default 500)"
    )
    parser.add_argument(
        "--audit", type=int, default=200, help="audited trajectories per simulation (default 200)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="default: all")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args(argv)
    if args.sims < 1 or args.n_boot < 1 or args.questions < 1 or args.audit < 1:
        parser.error("--sims, --n-boot, --questions and --audit must each be at least 1")
    rows = []
    print(
        f"{'scenario':<10} {'θ':>5} {'audit θ':>7} {'se':>5} {'sp':>5} {'corrected covers':>16} "
        f"{'raw covers':>10} {'mean θ̂':>7} {'bias':>7} {'width':>6} {'raw width':>9} {'secs':>6}"
    )
    for name in args.scenario or list(SCENARIOS):
        started = time.perf_counter()
        row = simulate(
            SCENARIOS[name],
            sims=args.sims,
            questions=args.questions,
            audit_size=args.audit,
            n_boot=args.n_boot,
            seed=args.seed,
        )
        row["seconds"] = time.perf_counter() - started
        rows.append(row)
        print(
            f"{name:<10} {row['rate']:>5.3f} {row['audit_rate']:>7.2f} {row['se']:>5.2f} {row['sp']:>5.2f} "
            f"{100 * row['corrected_coverage']:>15.1f}% {100 * row['raw_coverage']:>9.1f}% "
            f"{row['mean_corrected']:>7.4f} {row['bias']:>+7.4f} {row['mean_width']:>6.3f} "
            f"{row['mean_raw_width']:>9.3f} {row['seconds']:>6.0f}"
        )
    print(
        f"{args.sims} simulated audits of {args.audit} trajectories each, runs of {args.questions} questions, "
        f"{args.n_boot} bootstrap resamples per interval; 95% intervals."
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
