"""``result.json`` and ``result.md``: the runner's own table from the spool's evaluation stages (the web app
recomputes its own from the replayed runs and never reads these)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer.jobs.analysis import AnalysisError, analyse, evaluation_table, spool_pairs
from trainer.jobs.plan import ExperimentPlan
from trainer.jobs.spool import ExperimentSpool, read_rows, write_json, write_text

COLUMNS = ("cem", "em", "f1", "average_searches", "osr", "usr", "format_ok_rate")


def _cell(value: float | None, sign: str = "") -> str:
    return "—" if value is None else f"{value:{sign}.3f}"


def _interval(d: Mapping[str, Any]) -> str:
    return "—" if d["low"] is None else f"[{d['low']:+.3f}, {d['high']:+.3f}]"


def table_markdown(table: Mapping[str, Any]) -> str:
    """An :func:`~trainer.jobs.analysis.evaluation_table` in Markdown (a * marks an interval that excludes 0)."""
    lines = ["| model | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for model, row in table["rows"].items():
        lines.append(f"| {model} | " + " | ".join(_cell(row[m]) for m in COLUMNS) + " |")
    for label, diff in table["differences"].items():
        lines += ["", f"**{label}** ({diff['questions']} paired questions, paired bootstrap 95% CI)", ""]
        lines += ["| metric | base | other | diff | 95% CI |", "|---|---:|---:|---:|---|"]
        for m in COLUMNS:
            d = diff[m]
            star = " *" if d["low"] is not None and (d["low"] > 0 or d["high"] < 0) else ""
            lines.append(
                f"| {m} | {_cell(d['baseline'])} | {_cell(d['method'])} | {_cell(d['difference'], '+')} | "
                f"{_interval(d)}{star} |"
            )
    return "\n".join(lines) + "\n"


def pooled_markdown(result: Mapping[str, Any]) -> str:
    """:func:`~trainer.jobs.analysis.analyse`'s result in Markdown: pooled, per pair, gaming checks, decision."""
    baseline, method = result["arms"]["baseline"], result["arms"]["method"]
    lines = [
        f"**Pooled {method} − {baseline}** ({result['seeds_per_arm']} seed pairs, {result['eval_questions']} "
        f"held-out questions, two-level bootstrap 95% interval, {result['bootstrap']['resamples']} resamples)",
        "",
        f"| metric | {baseline} | {method} | difference | 95% interval | same sign in every pair |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, d in result["pooled"].items():
        lines.append(
            f"| {name} | {_cell(d['baseline'])} | {_cell(d['method'])} | {_cell(d['difference'], '+')} | "
            f"{_interval(d)} | {'yes' if d['same_sign'] else 'no'} |"
        )
    lines += ["", "**Per seed pair** (one-level paired 95% interval)", ""]
    lines += [
        f"| pair | steps ({baseline}/{method}) | metric | {baseline} | {method} | difference | 95% interval |"
    ]
    lines += ["|---|---|---|---:|---:|---:|---|"]
    for label, table in result["pairs"].items():
        steps = result["per_seed"][label]["steps"]
        for name in ("average_searches", "redundant_search_rate", "cem", "acc", "em"):
            d = table[name]
            lines.append(
                f"| {label} | {steps[baseline]}/{steps[method]} | {name} | {_cell(d['baseline'])} | "
                f"{_cell(d['method'])} | {_cell(d['difference'], '+')} | {_interval(d)} |"
            )
    lines += ["", "**Gaming checks per arm and seed**", ""]
    lines += [
        "| pair | arm | answer words | most common answer (share) | steps/trajectory | USR | CEM | CEM ≤10 words |"
    ]
    lines += ["|---|---|---:|---|---:|---:|---:|---:|"]
    for label, info in result["per_seed"].items():
        for arm in (baseline, method):
            a = info[arm]
            lines.append(
                f"| {label} | {arm} | {_cell(a['mean_answer_words'])} | {a['top_answer']!r} "
                f"({a['top_answer_share']:.3f}) | {_cell(a['steps_per_trajectory'])} | {_cell(a['usr'])} | "
                f"{_cell(a['cem'])} | {_cell(a['cem_le10'])} |"
            )
    lines += ["", f"**Decision**: {result['decision']['verdict']}"]
    return "\n".join(lines) + "\n"


def stage_records(spool: ExperimentSpool, key: str) -> list[dict[str, Any]] | None:
    if not spool.stage_finished(key):
        return None
    return read_rows(spool.stage(key) / "records.jsonl")


def write_result(spool: ExperimentSpool, plan: ExperimentPlan, *, final: bool = True) -> dict[str, Any]:
    """``result.json`` and ``result.md`` of what finished: a table per seed, the pooled tables with 2+ seeds
    (logged when ``final``; the runner rewrites the result after each evaluation)."""
    starts = {m: stage_records(spool, f"start-{m}") for m in plan.methods}
    per_seed: dict[str, Any] = {}
    markdown = [f"# {spool.manifest.get('name', 'experiment')}", ""]
    for seed in plan.seed_values:
        evals = {f"start-{m}": r for m, r in starts.items() if r is not None}
        for arm in plan.arms:
            records = stage_records(spool, f"eval-{arm.name}-s{seed}")
            if records is not None:
                evals[arm.name] = records
        others = [a for a in plan.arms if a.name != plan.baseline]
        pairs = [(plan.baseline, a.name) for a in others]
        pairs += [(f"start-{a.method}", a.name) for a in plan.arms]
        per_seed[str(seed)] = evaluation_table(evals, pairs, seed)
        markdown += [f"## Seed {seed}", "", table_markdown(per_seed[str(seed)])]
    result: dict[str, Any] = {"seeds": per_seed, "pooled": {}}
    runs, _ = spool_pairs(spool.root, spool.manifest)
    if len(runs) >= 2:
        for arm in plan.arms:
            if arm.name == plan.baseline:
                continue
            try:
                pooled = analyse(runs, baseline=plan.baseline, method=arm.name, seed=plan.seed)
            except AnalysisError as exc:
                if final:
                    spool.log(f"pooled tables: {exc}")
                continue
            result["pooled"][arm.name] = pooled
            markdown += [
                f"## Over {len(runs)} seed pairs: {arm.name} − {plan.baseline}",
                "",
                pooled_markdown(pooled),
            ]
            if final:
                spool.log(
                    f"pooled tables ({arm.name}): {len(runs)} seed pairs; {pooled['decision']['verdict']}"
                )
    write_json(spool.root / "result.json", result)
    write_text(spool.root / "result.md", "\n".join(markdown))
    return result
