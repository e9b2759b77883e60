"""Experiment #3's analysis (docs/results/experiment-3.md): per-seed evaluations into the per-pair and pooled tables.

Each SEED_DIR is one seed pair: the two arms trained from the same start with the same questions in the same order
and evaluated on the same held-out questions, as ``bench/experiment_gpu.py --seeds N`` writes them
(``eval_trained_outcome.jsonl``, ``eval_trained_process.jsonl`` and ``runs/<arm>/metrics.jsonl``). Writes
``--json`` (default docs/results/experiment-3.json) and prints the tables in Markdown:

* the pooled process − outcome differences over seed pairs with their two-level 95% intervals
  (``scoring.seed_bootstrap``: seed pairs, then questions): #Search, the redundant-search rate (HiPRAG Eq. 2's OSR:
  search steps the judge flags as over-search over judged search steps; undefined for an arm that never searches,
  so redundant searches per question beside it), CEM, FlashRAG's acc, EM, and the gaming
  checks that have a per-question form (USR, CEM counting answers of more than 10 words as wrong, answer length in
  words, steps per trajectory);
* the table per seed pair (each pair's one-level paired interval) and whether every pair has the pooled sign;
* per arm and seed: mean answer length, the most common answer and its share, steps per trajectory, USR;
* the decision rule's verdict (docs/results/experiment-3.md, "Decision rule").

    .venv/bin/python bench/experiment3_analysis.py OUT/seeds/0 OUT/seeds/1 OUT/seeds/2 [--split demo/experiment3_split.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scoring.formats import parse  # noqa: E402
from scoring.metrics import flashrag_acc, normalize_answer  # noqa: E402
from scoring.paired_bootstrap import Ratio, question_ratios  # noqa: E402
from scoring.seed_bootstrap import SeedBootstrap, SeedPair, seed_bootstrap  # noqa: E402

ARMS = ("outcome", "process")  # baseline λp = 0, method λp = 0.4 (HiPRAG Eq. 4)
LONG_ANSWER_WORDS = (
    10  # a longer answer counts as wrong in cem_le10 (a list of guesses earns CEM by covering)
)
# The JSON's names (the issue's) for scoring.paired_bootstrap's metrics, and the extra per-question ones.
NAMES = {
    "average_searches": "average_searches",
    "osr": "redundant_search_rate",
    "redundant": "redundant_searches_per_question",
    "cem": "cem",
    "acc": "acc",
    "em": "em",
    "usr": "usr",
    "cem_le10": "cem_le10",
    "answer_words": "answer_words",
    "steps": "steps_per_trajectory",
    "format_ok_rate": "format_ok_rate",
}
PRIMARY = ("average_searches", "redundant_search_rate")
NON_INFERIOR = ("cem", "em")
MARGIN = -0.02  # CEM's and EM's 95% lower bounds must lie above −2 points
TARGET = {"seeds_per_arm": 3, "min_steps_per_run": 40, "eval_questions": 1000}


class AnalysisError(Exception):
    """A seed folder or evaluation file that cannot be analysed, named with its path, line and field."""


def read_eval(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise AnalysisError(f"{path}: no such file")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AnalysisError(f"{path}:{number}: not JSON ({exc.msg})") from None
        for field in ("id", "golden_answers", "answer", "cem", "em", "f1", "format_ok", "n_searches"):
            if field not in row:
                raise AnalysisError(f"{path}:{number}: no field {field!r}")
        rows.append(row)
    if not rows:
        raise AnalysisError(f"{path}: no evaluated question")
    return rows


def answer_words(answer: str | None) -> int:
    return len(answer.split()) if answer else 0


def trajectory_steps(row: dict[str, Any]) -> int:
    """Steps of the trajectory (search and non-search) as its format's parser reads them."""
    if "text" not in row:
        return 0
    return len(parse(str(row.get("format") or "hiprag"), str(row["text"])).steps)


def question_row(row: dict[str, Any]) -> dict[str, Ratio]:
    """One evaluated question's contributions: scoring.paired_bootstrap's metrics (acc from the answer when the
    file predates it) and the gaming checks' per-question ones."""
    answer = row["answer"]
    acc = row.get("acc")
    if acc is None:
        acc = flashrag_acc(answer, row["golden_answers"])  # FlashRAG's acc (Sub_ExactMatch)
    ratios = question_ratios(
        cem=bool(row["cem"]),
        em=bool(row["em"]),
        f1=float(row["f1"]),
        format_ok=bool(row["format_ok"]),
        n_searches=int(row["n_searches"]),
        over_search=row.get("over_search") or (),
        under_search=row.get("under_search") or (),
        acc=bool(acc),
    )
    words = answer_words(answer)
    ratios["cem_le10"] = (float(bool(row["cem"]) and words <= LONG_ANSWER_WORDS), 1.0)
    ratios["answer_words"] = (float(words), 1.0) if answer is not None else (0.0, 0.0)
    ratios["steps"] = (float(trajectory_steps(row)), 1.0)
    # defined where OSR is not (an arm that stopped searching): flagged search steps per question
    ratios["redundant"] = (sum(1.0 for flag in row.get("over_search") or () if flag is True), 1.0)
    return ratios


def steps_done(folder: Path) -> int | None:
    """The last training step in ``folder/metrics.jsonl`` (None when there is no such file)."""
    path = folder / "metrics.jsonl"
    if not path.is_file():
        return None
    done = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            done = max(done, int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):
            continue
    return done


def arm_summary(rows: list[dict[str, Any]], ratios: dict[str, dict[str, Ratio]]) -> dict[str, Any]:
    answers = [normalize_answer(r["answer"]) for r in rows if r["answer"] is not None]
    top, top_count = Counter(answers).most_common(1)[0] if answers else (None, 0)

    def pooled(metric: str) -> float | None:
        numerator = sum(r[metric][0] for r in ratios.values())
        denominator = sum(r[metric][1] for r in ratios.values())
        return numerator / denominator if denominator else None

    return {
        "questions": len(rows),
        "answered": len(answers),
        "mean_answer_words": pooled("answer_words"),
        "top_answer": top,
        "top_answer_share": top_count / len(rows),
        "steps_per_trajectory": pooled("steps"),
        "average_searches": pooled("average_searches"),
        "redundant_search_rate": pooled("osr"),
        "redundant_searches_per_question": pooled("redundant"),
        "usr": pooled("usr"),
        "cem": pooled("cem"),
        "cem_le10": pooled("cem_le10"),
        "acc": pooled("acc"),
        "em": pooled("em"),
    }


def load_pairs(folders: list[Path]) -> tuple[list[SeedPair], dict[str, Any], list[str]]:
    pairs, per_seed, expected = [], {}, None
    for folder in folders:
        label = folder.name
        arms = {}
        for arm in ARMS:
            path = folder / f"eval_trained_{arm}.jsonl"
            rows = read_eval(path)
            ids = [str(r["id"]) for r in rows]
            if len(set(ids)) != len(ids):
                raise AnalysisError(f"{path}: a question id is listed twice")
            if expected is None:
                expected = ids
            elif sorted(ids) != sorted(expected):
                raise AnalysisError(
                    f"{path}: {len(ids)} questions, not the {len(expected)} of the first file "
                    f"(every seed and arm must answer the same held-out questions)"
                )
            ratios = {str(r["id"]): question_row(r) for r in rows}
            arms[arm] = (rows, ratios)
        pairs.append(SeedPair(label, arms["outcome"][1], arms["process"][1]))
        per_seed[label] = {
            "steps": {arm: steps_done(folder / "runs" / arm) for arm in ARMS},
            **{arm: arm_summary(*arms[arm]) for arm in ARMS},
        }
    assert expected is not None
    return pairs, per_seed, expected


def _entry(d: Any) -> dict[str, Any]:
    return {k: getattr(d, k) for k in ("difference", "low", "high", "baseline", "method")}


def decide(result: dict[str, Any]) -> dict[str, Any]:
    """The decision rule of docs/results/experiment-3.md applied to the pooled figures."""
    pooled = result["pooled"]
    design_met = all(result[k] is not None and result[k] >= v for k, v in TARGET.items())
    primary = [
        name
        for name in PRIMARY
        if pooled[name]["high"] is not None and pooled[name]["high"] < 0 and pooled[name]["same_sign"]
    ]
    lower_bounds_met = all(pooled[n]["low"] is not None and pooled[n]["low"] > MARGIN for n in NON_INFERIOR)
    if not design_met:
        verdict = "design not met (seeds, steps or held-out questions below the plan): descriptive only"
    elif primary and lower_bounds_met:
        verdict = "supported: the process arm searches less redundantly in every seed pair at no CEM/EM cost"
    elif primary:
        verdict = "fewer redundant searches, but CEM or EM may be lower by more than 2 points"
    else:
        verdict = (
            "not supported: no pooled reduction whose interval lies below 0 with the same sign in every pair"
        )
    return {
        "design_met": design_met,
        "primary_met_by": primary,
        "cem_em_lower_bounds_above_margin": lower_bounds_met,
        "margin": MARGIN,
        "verdict": verdict,
    }


def analyse(
    folders: list[Path], *, split: Path | None = None, n_resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    pairs, per_seed, ids = load_pairs(folders)
    found: SeedBootstrap = seed_bootstrap(pairs, tuple(NAMES), n_resamples=n_resamples, seed=seed)
    steps = [s for info in per_seed.values() for s in info["steps"].values()]
    result: dict[str, Any] = {
        "name": "Experiment #3: HiPRAG λp = 0.4 (process) − λp = 0 (outcome), paired by seed",
        "script": "bench/experiment3_analysis.py",
        "seeds_per_arm": len(pairs),
        "min_steps_per_run": None if any(s is None for s in steps) else min(steps),  # type: ignore[type-var]
        "eval_questions": len(ids),
        "bootstrap": {
            "levels": "seed pairs, then questions",
            "design": found.pooled["cem"].design,
            "resamples": n_resamples,
            "confidence": 0.95,
            "seed": seed,
        },
        "pooled": {
            NAMES[m]: {
                **_entry(d),
                "same_sign": d.same_sign,
                "pairs_defined": d.n_pairs_defined,
                "undefined_resamples": d.n_undefined,
            }
            for m, d in found.pooled.items()
        },
        "pairs": {label: {NAMES[m]: _entry(d) for m, d in table.items()} for label, table in found.pairs},
        "per_seed": per_seed,
    }
    if split is not None:
        data = json.loads(split.read_text(encoding="utf-8"))
        outside = sorted(set(ids) - set(data["held_out"]))
        if outside:
            raise AnalysisError(
                f"{split}: {len(outside)} evaluated questions are not held out, e.g. {outside[0]!r}"
            )
        result["split"] = {
            "file": str(split.resolve().relative_to(REPO) if split.resolve().is_relative_to(REPO) else split),
            "sha256": hashlib.sha256(split.read_bytes()).hexdigest(),
            "salt": data["salt"],
            "held_out": len(data["held_out"]),
            "train": len(data["train"]),
        }
    result["decision"] = decide(result)
    return result


def _f(value: Any, sign: str = "") -> str:
    return "—" if value is None else f"{value:{sign}.3f}"


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"**Pooled process − outcome** ({result['seeds_per_arm']} seed pairs, {result['eval_questions']} held-out "
        f"questions, two-level bootstrap 95% interval, {result['bootstrap']['resamples']} resamples)",
        "",
        "| metric | outcome | process | difference | 95% interval | same sign in every pair |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, d in result["pooled"].items():
        interval = "—" if d["low"] is None else f"[{d['low']:+.3f}, {d['high']:+.3f}]"
        lines.append(
            f"| {name} | {_f(d['baseline'])} | {_f(d['method'])} | {_f(d['difference'], '+')} | {interval} | "
            f"{'yes' if d['same_sign'] else 'no'} |"
        )
    lines += ["", "**Per seed pair** (one-level paired 95% interval)", ""]
    lines += ["| pair | steps (o/p) | metric | outcome | process | difference | 95% interval |"]
    lines += ["|---|---|---|---:|---:|---:|---|"]
    for label, table in result["pairs"].items():
        steps = result["per_seed"][label]["steps"]
        for name in ("average_searches", "redundant_search_rate", "cem", "acc", "em"):
            d = table[name]
            interval = "—" if d["low"] is None else f"[{d['low']:+.3f}, {d['high']:+.3f}]"
            lines.append(
                f"| {label} | {steps['outcome']}/{steps['process']} | {name} | {_f(d['baseline'])} | "
                f"{_f(d['method'])} | {_f(d['difference'], '+')} | {interval} |"
            )
    lines += ["", "**Gaming checks per arm and seed**", ""]
    lines += [
        "| pair | arm | answer words | most common answer (share) | steps/trajectory | USR | CEM | CEM ≤10 words |"
    ]
    lines += ["|---|---|---:|---|---:|---:|---:|---:|"]
    for label, info in result["per_seed"].items():
        for arm in ARMS:
            a = info[arm]
            lines.append(
                f"| {label} | {arm} | {_f(a['mean_answer_words'])} | {a['top_answer']!r} ({a['top_answer_share']:.3f}) "
                f"| {_f(a['steps_per_trajectory'])} | {_f(a['usr'])} | {_f(a['cem'])} | {_f(a['cem_le10'])} |"
            )
    lines += ["", f"**Decision**: {result['decision']['verdict']}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", nargs="+", type=Path, help="one folder per seed pair")
    parser.add_argument("--split", type=Path, help="the split (demo/experiment3_split.json) the run used")
    parser.add_argument("--json", type=Path, default=REPO / "docs" / "results" / "experiment-3.json")
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    args = parser.parse_args(argv)
    if len({folder.name for folder in args.seeds}) != len(args.seeds):
        parser.error("seed folders must have different names (each names its pair)")
    try:
        result = analyse(args.seeds, split=args.split, n_resamples=args.resamples, seed=args.seed)
    except AnalysisError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    text = markdown(result)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
