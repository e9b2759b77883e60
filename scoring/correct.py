"""Judge-corrected step rates (OSR, USR): Rogan–Gladen with a two-sample cluster bootstrap interval.

A detector (the over-search or under-search judge) flags steps of a run; its raw rate ``q`` is flagged steps over
judged steps (HiPRAG Eq. 2's OSR/USR). A closed audit of the same judge version gives, per detector, the judge's
sensitivity ``se`` and specificity ``sp`` against the adjudicated human labels (the judge is the test, the humans
the truth). If the run's true rate is θ, then ``q = se·θ + (1 − sp)·(1 − θ)``, so

    θ̂ = (q + sp − 1) / (se + sp − 1)          (Rogan and Gladen, 1978, Eq. 1)

clipped to [0, 1]. The estimator is identified only when ``se + sp > 1`` (a judge better than chance); otherwise
:func:`corrected_rate` returns ``None`` with the reason.

The interval carries both sources of error: the run's sampling (which questions were asked) and the audit's
(which trajectories were labelled). One resample draws the run's questions with replacement *and*, independently,
the audit's trajectories with replacement (each is a cluster: steps of one trajectory share a question and a model
state), recomputes ``q``, ``se`` and ``sp`` from the drawn clusters' summed counts and θ̂ from them; the interval
is the percentile interval of those θ̂ (type 7 quantiles, as :mod:`scoring.agreement_bootstrap`). Resamples where
θ̂ is undefined (no human-positive step drawn, ``se + sp ≤ 1``) are left out; when every one is, there is no
interval. The raw rate's interval resamples the run only.

Optional Horvitz–Thompson weights (one per audit cluster, the inverse of its inclusion probability, see
:mod:`scoring.audit_weights`) turn ``se`` and ``sp`` into weighted ratios ``Σ w·tp / Σ w·(tp + fn)``; a stratified
audit that over-sampled flagged steps then still estimates the judge's accuracy on the whole run.

Speed and determinism: clusters with identical counts (and weight) are pooled into types, and one resample draws
how many of each type it holds (a multinomial, as conditional binomials), so a resample costs the number of
distinct types, not the number of clusters: 2,000 resamples of a 10,000-step run take milliseconds. One
``random.Random(seed)`` draws everything, with a binomial sampler defined here (Hörmann's BTRS, the algorithm of
Python 3.12's ``random.binomialvariate``), so the same input and seed give the same interval on every Python ≥ 3.11.

Command line, for a statistician working by hand (each step its own cluster)::

    python -m scoring.correct --positives 352 --total 500 --tp 40 --fp 12 --fn 5 --tn 143 [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from scoring.agreement_bootstrap import percentile

DEFAULT_LEVEL = 0.95
DEFAULT_RESAMPLES = 2000
METHOD = "percentile bootstrap over audit trajectories and run questions (two independent cluster resamples)"


@dataclass(frozen=True)
class AuditCounts:
    """One audited trajectory (a cluster) for one detector: judge = the test, adjudicated humans = the truth."""

    tp: int  # judge flags, humans flag
    fp: int  # judge flags, humans do not
    fn: int  # judge does not flag, humans do
    tn: int  # neither flags

    @property
    def total(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


@dataclass(frozen=True)
class CorrectedRate:
    """A run's raw rate beside its judge-corrected rate; ``reason`` says why a number is ``None``."""

    raw: float | None  # q = positives / total (the judge's raw rate)
    corrected: float | None  # Rogan–Gladen, clipped to [0, 1]; None when not identifiable
    low: float | None  # 95% interval of the corrected rate
    high: float | None
    raw_low: float | None  # interval of the raw rate (run sampling only)
    raw_high: float | None
    sensitivity: float | None
    specificity: float | None
    reason: str | None
    method: str


def rogan_gladen(q: float, se: float, sp: float) -> float:
    """Rogan–Gladen's corrected prevalence, clipped to [0, 1]; ``se + sp`` must exceed 1.

    >>> round(rogan_gladen(0.175, 0.85, 0.90), 6)
    0.1
    >>> rogan_gladen(0.05, 0.85, 0.90)  # below the judge's false-positive floor: clipped
    0.0
    """
    youden = se + sp - 1.0
    if youden <= 0.0:
        raise ValueError(f"se + sp <= 1 (se {se:.3f}, sp {sp:.3f}): the judge is no better than chance")
    # Rogan and Gladen (1978): θ = (q + sp − 1) / (se + sp − 1)
    return min(1.0, max(0.0, (q + sp - 1.0) / youden))


def binomial(rng: random.Random, n: int, p: float) -> int:
    """One Binomial(n, p) draw from ``rng`` (Devroye's geometric method below n·p = 10, else Hörmann's BTRS)."""
    if p <= 0.0 or n == 0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    if n * p < 10.0:
        # Waiting times between successes are geometric: O(n·p) draws.
        x = y = 0
        c = math.log(1.0 - p)
        if not c:
            return 0
        while True:
            y += math.floor(math.log(1.0 - rng.random()) / c) + 1
            if y > n:
                return x
            x += 1
    # BTRS: transformed rejection with squeeze (W. Hörmann, 1993), constant expected time.
    spq = math.sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    lpq = math.log(p / (1.0 - p))
    m = math.floor((n + 1) * p)
    h = math.lgamma(m + 1) + math.lgamma(n - m + 1)
    while True:
        u = rng.random() - 0.5
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        v = rng.random()
        if us >= 0.07 and v <= vr:
            return k
        v *= alpha / (a / (us * us) + b)
        if v > 0.0 and math.log(v) <= h - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - m) * lpq:
            return k


def multinomial(rng: random.Random, n: int, counts: Sequence[int]) -> list[int]:
    """How many of ``n`` draws with replacement land on each type, type ``k`` having ``counts[k]`` members."""
    drawn: list[int] = []
    left_n, left_mass = n, sum(counts)
    for count in counts[:-1]:
        x = binomial(rng, left_n, count / left_mass) if left_mass > 0 else 0
        drawn.append(x)
        left_n -= x
        left_mass -= count
    drawn.append(left_n)
    return drawn


def _check_counts(audit: Sequence[AuditCounts], weights: Sequence[float] | None) -> None:
    for i, cluster in enumerate(audit):
        for name in ("tp", "fp", "fn", "tn"):
            value = getattr(cluster, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"audit[{i}].{name} must be a non-negative integer, got {value!r}")
    if weights is not None:
        if len(weights) != len(audit):
            raise ValueError(f"weights has {len(weights)} entries but the audit has {len(audit)} clusters")
        for i, w in enumerate(weights):
            if not (math.isfinite(w) and w > 0):
                raise ValueError(f"weights[{i}] must be a positive finite number, got {w!r}")


def _check_run(run: Sequence[tuple[int, int]]) -> None:
    for i, (positives, steps) in enumerate(run):
        if positives < 0 or steps < 0:
            raise ValueError(f"run[{i}] must hold non-negative counts, got ({positives}, {steps})")
        if positives > steps:
            raise ValueError(f"run[{i}] has {positives} positives over {steps} steps")


def _se_sp(tp: float, fp: float, fn: float, tn: float) -> tuple[float | None, float | None]:
    se = tp / (tp + fn) if tp + fn > 0 else None
    sp = tn / (tn + fp) if tn + fp > 0 else None
    return se, sp


def _no_correction_reason(se: float | None, sp: float | None, audit_total: float) -> str | None:
    if audit_total == 0:
        return "the audit has no labels for this detector"
    if se is None:
        return "the audit has no step the humans flag, so the judge's sensitivity is undefined"
    if sp is None:
        return "the audit has no step the humans leave unflagged, so the judge's specificity is undefined"
    if se + sp <= 1.0:
        return f"se + sp <= 1 (se {se:.3f}, sp {sp:.3f}): the judge is no better than chance"
    return None


def corrected_rate(
    run: Sequence[tuple[int, int]],
    audit: Sequence[AuditCounts],
    *,
    level: float = DEFAULT_LEVEL,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    weights: Sequence[float] | None = None,
) -> CorrectedRate:
    """The run's raw and judge-corrected rate with percentile bootstrap intervals.

    ``run`` holds one ``(judge positives, judged steps)`` per run question (a cluster); ``audit`` one
    :class:`AuditCounts` per audited trajectory (a cluster) with an optional Horvitz–Thompson weight each.
    Invalid input raises ``ValueError`` naming the entry; an unidentifiable correction is ``None`` with a reason.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    _check_run(run)
    _check_counts(audit, weights)
    ws = list(weights) if weights is not None else [1.0] * len(audit)

    positives = sum(p for p, _ in run)
    steps = sum(s for _, s in run)
    raw = positives / steps if steps > 0 else None
    tp = sum(w * c.tp for c, w in zip(audit, ws, strict=True))
    fp = sum(w * c.fp for c, w in zip(audit, ws, strict=True))
    fn = sum(w * c.fn for c, w in zip(audit, ws, strict=True))
    tn = sum(w * c.tn for c, w in zip(audit, ws, strict=True))
    se, sp = _se_sp(tp, fp, fn, tn)
    reason = _no_correction_reason(se, sp, tp + fp + fn + tn)
    if raw is None:
        reason = "the run has no judged steps for this detector"
    corrected = None
    if reason is None and raw is not None and se is not None and sp is not None:
        corrected = rogan_gladen(raw, se, sp)

    run_types = Counter((p, s) for p, s in run if s > 0)
    run_keys = list(run_types)
    run_counts = [run_types[k] for k in run_keys]
    n_run = sum(run_counts)
    audit_types = Counter((c.tp, c.fp, c.fn, c.tn, w) for c, w in zip(audit, ws, strict=True) if c.total > 0)
    audit_keys = list(audit_types)
    audit_counts = [audit_types[k] for k in audit_keys]
    n_audit = sum(audit_counts)

    rng = random.Random(seed)
    raws: list[float] = []
    fixed: list[float] = []
    for _ in range(n_boot):
        run_draw = multinomial(rng, n_run, run_counts) if n_run else []
        q_num = sum(x * k[0] for x, k in zip(run_draw, run_keys, strict=True))
        q_den = sum(x * k[1] for x, k in zip(run_draw, run_keys, strict=True))
        if q_den == 0:
            continue
        q = q_num / q_den
        raws.append(q)
        if corrected is None:
            continue
        audit_draw = multinomial(rng, n_audit, audit_counts)
        sums = [0.0, 0.0, 0.0, 0.0]
        for x, key in zip(audit_draw, audit_keys, strict=True):
            if x:
                for j in range(4):
                    sums[j] += x * key[4] * key[j]
        b_se, b_sp = _se_sp(*sums)
        if b_se is None or b_sp is None or b_se + b_sp <= 1.0:
            continue
        fixed.append(rogan_gladen(q, b_se, b_sp))

    tail = (1.0 - level) / 2.0
    raws.sort()
    fixed.sort()
    raw_low = percentile(raws, tail) if raws else None
    raw_high = percentile(raws, 1.0 - tail) if raws else None
    low = percentile(fixed, tail) if fixed else None
    high = percentile(fixed, 1.0 - tail) if fixed else None
    return CorrectedRate(
        raw=raw,
        corrected=corrected,
        low=low,
        high=high,
        raw_low=raw_low,
        raw_high=raw_high,
        sensitivity=se,
        specificity=sp,
        reason=reason,
        method=METHOD,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scoring.correct",
        description="Judge-corrected rate (Rogan–Gladen) with a 95%% bootstrap interval. The audit's counts take "
        "the judge as the test and the adjudicated humans as the truth; every step is its own cluster.",
    )
    parser.add_argument("--positives", type=int, required=True, help="steps the judge flags in the run (K)")
    parser.add_argument("--total", type=int, required=True, help="steps the judge judged in the run (N)")
    parser.add_argument("--tp", type=int, required=True, help="audit: judge flags, humans flag")
    parser.add_argument("--fp", type=int, required=True, help="audit: judge flags, humans do not")
    parser.add_argument("--fn", type=int, required=True, help="audit: judge does not flag, humans do")
    parser.add_argument("--tn", type=int, required=True, help="audit: neither flags")
    parser.add_argument("--level", type=float, default=DEFAULT_LEVEL, help="interval level (default 0.95)")
    parser.add_argument(
        "--n-boot", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples (default 2000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed of the bootstrap (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _validate_cli(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for name in ("positives", "total", "tp", "fp", "fn", "tn"):
        if getattr(args, name) < 0:
            parser.error(f"--{name} must not be negative, got {getattr(args, name)}")
    if args.total == 0:
        parser.error("--total must be at least 1: the run has no judged steps")
    if args.positives > args.total:
        parser.error(
            f"--positives ({args.positives}) exceeds --total ({args.total}): the counts do not add up"
        )
    if args.tp + args.fp + args.fn + args.tn == 0:
        parser.error("--tp, --fp, --fn and --tn are all 0: the audit is empty")
    if args.tp + args.fn == 0:
        parser.error("--tp + --fn is 0: the audit has no step the humans flag, so sensitivity is undefined")
    if args.tn + args.fp == 0:
        parser.error(
            "--tn + --fp is 0: the audit has no step the humans leave unflagged, so specificity is undefined"
        )
    se = args.tp / (args.tp + args.fn)
    sp = args.tn / (args.tn + args.fp)
    if se + sp <= 1.0:
        parser.error(
            f"--tp/--fn/--tn/--fp give se + sp <= 1 (se {se:.3f}, sp {sp:.3f}): "
            "the judge is no better than chance, so the rate cannot be corrected"
        )
    if not 0.0 < args.level < 1.0:
        parser.error(f"--level must lie strictly between 0 and 1, got {args.level}")
    if args.n_boot < 1:
        parser.error(f"--n-boot must be at least 1, got {args.n_boot}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _validate_cli(parser, args)
    run = [(1, 1)] * args.positives + [(0, 1)] * (args.total - args.positives)
    audit = (
        [AuditCounts(1, 0, 0, 0)] * args.tp
        + [AuditCounts(0, 1, 0, 0)] * args.fp
        + [AuditCounts(0, 0, 1, 0)] * args.fn
        + [AuditCounts(0, 0, 0, 1)] * args.tn
    )
    result = corrected_rate(run, audit, level=args.level, n_boot=args.n_boot, seed=args.seed)
    if args.json:
        print(json.dumps(asdict(result) | {"level": args.level, "n_boot": args.n_boot, "seed": args.seed}))
        return 0

    def pct(value: float | None) -> str:
        return "—" if value is None else f"{100 * value:.1f}%"

    print(
        f"raw        {pct(result.raw)}  [{pct(result.raw_low)}, {pct(result.raw_high)}]  (run sampling only)"
    )
    print(f"corrected  {pct(result.corrected)}  [{pct(result.low)}, {pct(result.high)}]  ({result.method})")
    print(f"judge      sensitivity {pct(result.sensitivity)}, specificity {pct(result.specificity)}")
    if result.reason:
        print(f"no corrected rate: {result.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
