"""A stratified audit that over-samples flagged trajectories still estimates the judge's accuracy without bias.

    python bench/stratified_audit.py [--draws 1000] [--audit 200] [--population 4000] [--oversample 5] [--json PATH]

One simulated run (a finite population of ``--population`` trajectories of 1–4 steps, fixed seed) where over-search
is rare (a step's true rate 3%, steps of one trajectory sharing a Beta propensity) and the judge has sensitivity
0.85 and specificity 0.98, so its errors concentrate where it flags: a flagged trajectory is much more often wrong
than an unflagged one. The truth is the judge's accuracy, sensitivity and specificity over every step of the run.

Each of ``--draws`` audits samples ``--audit`` trajectories three ways (``scoring.audit_weights``):

* **uniform**: a simple random sample;
* **stratified, weighted**: strata by the judge's verdict, flagged trajectories over-sampled ``--oversample``×,
  every trajectory weighted by 1 / its inclusion probability (Horvitz–Thompson, Hájek ratios);
* **stratified, unweighted**: the same sample with every weight 1 (what a report without weights would say).

Printed per design and statistic: the mean error over the draws (bias, in points), its Monte Carlo standard error,
and the spread (standard deviation) of the estimates. The issue's target: the weighted accuracy's mean error under
1 point.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scoring.audit_weights import (  # noqa: E402
    FLAGGED,
    stratified_draw,
    verdict_stratum,
    weighted_accuracy,
)
from scoring.correct import AuditCounts  # noqa: E402

RATE, SE, SP, CONCENTRATION = 0.03, 0.85, 0.98, 4.0
STATISTICS = ("accuracy", "sensitivity", "specificity", "precision")


def population(size: int, seed: int) -> tuple[list[AuditCounts], list[str]]:
    """Every trajectory's (tp, fp, fn, tn) and its verdict stratum."""
    rng = random.Random(seed)
    counts, strata = [], []
    for _ in range(size):
        propensity = rng.betavariate(RATE * CONCENTRATION, (1 - RATE) * CONCENTRATION)
        tp = fp = fn = tn = 0
        flags = []
        for _ in range(rng.randint(1, 4)):
            truth = rng.random() < propensity
            flagged = rng.random() < (SE if truth else 1 - SP)
            flags.append(flagged)
            tp += truth and flagged
            fn += truth and not flagged
            fp += flagged and not truth
            tn += not truth and not flagged
        counts.append(AuditCounts(tp, fp, fn, tn))
        strata.append(verdict_stratum(flags))
    return counts, strata


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000, help="simulated audits (default 1000)")
    parser.add_argument("--audit", type=int, default=200, help="trajectories per audit (default 200)")
    parser.add_argument("--population", type=int, default=4000, help="trajectories in the run (default 4000)")
    parser.add_argument("--oversample", type=float, default=5.0, help="flagged stratum's factor (default 5)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args(argv)
    if args.draws < 1 or not 1 <= args.audit <= args.population or not args.oversample > 0:
        parser.error("--draws ≥ 1, 1 ≤ --audit ≤ --population and --oversample > 0 are required")

    counts, strata = population(args.population, args.seed)
    truth = weighted_accuracy([(c, 1.0) for c in counts])
    n_flagged = strata.count(FLAGGED)
    candidates = list(enumerate(strata))
    designs: dict[str, list[dict[str, float | None]]] = {
        "uniform": [],
        "stratified, weighted": [],
        "stratified, unweighted": [],
    }
    flagged_in_sample = {"uniform": 0, "stratified": 0}
    rng = random.Random(args.seed + 1)
    for draw in range(args.draws):
        uniform = rng.sample(range(args.population), args.audit)
        flagged_in_sample["uniform"] += sum(strata[i] == FLAGGED for i in uniform)
        designs["uniform"].append(vars(weighted_accuracy([(counts[i], 1.0) for i in uniform])))
        sample = stratified_draw(candidates, args.audit, seed=draw, oversample={FLAGGED: args.oversample})
        flagged_in_sample["stratified"] += sum(d.stratum == FLAGGED for d in sample)
        designs["stratified, weighted"].append(
            vars(weighted_accuracy([(counts[d.id], d.weight) for d in sample]))
        )
        designs["stratified, unweighted"].append(
            vars(weighted_accuracy([(counts[d.id], 1.0) for d in sample]))
        )

    print(
        f"run: {args.population} trajectories, {truth.n_steps} steps, {n_flagged} flagged trajectories "
        f"({100 * n_flagged / args.population:.1f}%); judge accuracy {100 * truth.accuracy:.2f}%, "  # type: ignore[operator]
        f"sensitivity {100 * truth.sensitivity:.2f}%, specificity {100 * truth.specificity:.2f}%"  # type: ignore[operator]
    )
    print(
        f"{args.draws} audits of {args.audit} trajectories; flagged per audit: uniform "
        f"{flagged_in_sample['uniform'] / args.draws:.1f}, stratified ({args.oversample:g}x) "
        f"{flagged_in_sample['stratified'] / args.draws:.1f}"
    )
    print(f"{'design':<24} {'statistic':<12} {'mean error (pts)':>16} {'± MC s.e.':>10} {'spread (pts)':>12}")
    report = []
    for design, rows in designs.items():
        for statistic in STATISTICS:
            target = getattr(truth, statistic)
            values = [row[statistic] for row in rows if row[statistic] is not None]
            errors = [100 * (v - target) for v in values]  # type: ignore[operator]
            mean = sum(errors) / len(errors)
            sd = math.sqrt(sum((e - mean) ** 2 for e in errors) / max(1, len(errors) - 1))
            report.append(
                {
                    "design": design,
                    "statistic": statistic,
                    "truth": target,
                    "mean_error_points": mean,
                    "mc_se_points": sd / math.sqrt(len(errors)),
                    "spread_points": sd,
                    "undefined": len(rows) - len(values),
                }
            )
            undefined = f"  ({len(rows) - len(values)} undefined)" if len(values) < len(rows) else ""
            print(
                f"{design:<24} {statistic:<12} {mean:>+16.2f} {sd / math.sqrt(len(errors)):>10.2f} "
                f"{sd:>12.2f}{undefined}"
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
