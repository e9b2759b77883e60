"""An experiment's result as the papers print it: rates in percent, differences in percentage points."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TITLES = {
    "cem": "CEM",
    "acc": "acc (FlashRAG)",  # FlashRAG's Sub_ExactMatch: Search-R1 Table 2, TIRESRAG-R1, AutoSearch
    "em": "EM",
    "f1": "F1",
    "average_searches": "#Search",
    "osr": "OSR",
    "usr": "USR",
    "format_ok_rate": "Format %",
}
COUNTS = ("average_searches",)  # not a rate: printed as is


def value_cell(value: float | None, metric: str) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if metric in COUNTS else f"{100 * value:.1f}"


def delta_cell(value: float | None, metric: str) -> str:
    if value is None:
        return "—"
    return f"{value:+.2f}" if metric in COUNTS else f"{100 * value:+.1f}"


def interval_cell(low: float | None, high: float | None, metric: str) -> str:
    if low is None or high is None:
        return "—"
    return f"[{delta_cell(low, metric)}, {delta_cell(high, metric)}]"


def pair_cell(d: Mapping[str, Any]) -> str:
    """A difference and its interval in one cell: ``-1.2 [-3.4, +0.9]`` (rates in points)."""
    return f"{delta_cell(d['difference'], d['metric'])} {interval_cell(d['low'], d['high'], d['metric'])}"


def _table(header: Sequence[str], lines: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in (header, *lines)) for i in range(len(header))]

    def fmt(values: Sequence[str]) -> str:
        first = values[0].ljust(widths[0])
        return "  ".join((first, *(v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True)))).rstrip()

    return [fmt(header), "-" * len(fmt(header)), *(fmt(line) for line in lines)]


def result_text(result: Mapping[str, Any]) -> str:
    """The table (one row per evaluated model) then, per comparison, each metric's difference with its CI."""
    metrics = list(TITLES)
    out = [f"judge: {result.get('judge', '?')}"]
    header = ["Model", "Run", "Steps", "N", *(TITLES[m] for m in metrics), "Judge err."]
    lines = [
        [
            row["label"],
            f"#{row['run_id']}",
            str(row["steps"]),
            str(row["n"]),
            *(value_cell(row.get(m), m) for m in metrics),
            str(row.get("n_judge_errors", 0)),
        ]
        for row in result.get("rows", [])
    ]
    out += _table(header, lines) if lines else ["(no evaluation has finished yet)"]
    confidence = round(100 * float(result.get("confidence", 0.95)))
    for comparison in result.get("differences", []):
        out += [
            "",
            f"{comparison['label']}: runs #{comparison['run_id']} − #{comparison['baseline_run_id']}, "
            f"{comparison['n_pairs']} paired questions, paired bootstrap {confidence}% CI "
            f"({result.get('resamples')} resamples; rates in percentage points)",
        ]
        lines = [
            [
                TITLES[d["metric"]],
                value_cell(d["baseline"], d["metric"]),
                value_cell(d["method"], d["metric"]),
                delta_cell(d["difference"], d["metric"]),
                interval_cell(d["low"], d["high"], d["metric"]),
                "*" if d["excludes_zero"] else "",
            ]
            for d in comparison["metrics"]
        ]
        out += _table(["Metric", "baseline", "arm", "diff", f"{confidence}% CI", "≠0"], lines)
    out += seed_pair_text(result)
    return "\n".join(out)


def seed_pair_text(result: Mapping[str, Any]) -> list[str]:
    """With several seed pairs: per other arm, each pair's difference with its paired interval, then the pooled
    one with its two-level interval and whether every pair has its sign."""
    if not result.get("pooled"):
        return []
    metrics = list(result.get("pooled_metrics", []))
    confidence = round(100 * float(result.get("confidence", 0.95)))
    out = [
        "",
        f"Seed pairs: arm − baseline per pair (paired bootstrap {confidence}% CI) and pooled over the pairs "
        f"(two-level bootstrap, seed pairs then questions; {result.get('resamples')} resamples; rates in "
        "percentage points)",
    ]
    for pooled in result["pooled"]:
        if pooled.get("error"):
            out += [f"{pooled['label']}: {pooled['error']}"]
            continue
        lines = [
            [f"seed {pair['seed']}", str(pair["n_questions"]), *(pair_cell(d) for d in pair["metrics"])]
            for pair in result.get("pairs", [])
            if pair["arm"] == pooled["arm"]
        ]
        lines.append(
            [f"pooled ({pooled['n_pairs']} pairs)", str(pooled["n_questions"])]
            + [pair_cell(d) + (" *" if d["excludes_zero"] else "") for d in pooled["metrics"]]
        )
        lines.append(
            ["same sign in every pair", ""] + ["yes" if d["same_sign"] else "no" for d in pooled["metrics"]]
        )
        out += ["", pooled["label"]]
        out += _table(["Seed pair", "N", *(TITLES[m] for m in metrics)], lines)
    return out
