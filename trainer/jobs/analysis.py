"""The experiment's table: each evaluation's figures, the paired differences per seed, and the pooled two-level ones.

* Per evaluation: scoring.paired_bootstrap's metrics pooled over its questions (CEM, EM, F1, #Search = HiPRAG
  Eq. 3, OSR/USR = Eq. 2, format-correct rate).
* Per seed pair: each arm − the baseline and each trained arm − the start, paired-bootstrap 95% intervals (2,000
  resamples) over the held-out questions.
* Over seeds (two or more): method − baseline with :func:`scoring.seed_bootstrap.seed_bootstrap`'s two-level
  interval (seed pairs, then questions), the gaming checks that have a per-question form (USR, CEM counting answers
  of more than 10 words as wrong, answer length, steps per trajectory), per arm and seed the most common answer, and
  docs/results/experiment-3.md's decision rule.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scoring.formats import parse
from scoring.metrics import flashrag_acc, normalize_answer
from scoring.paired_bootstrap import METRICS, Ratio, pair_by_key, paired_bootstrap, question_ratios
from scoring.seed_bootstrap import SeedBootstrap, SeedPair, seed_bootstrap
from trainer import spool as run_spool
from trainer.jobs.spool import read_rows, stage_finished

LONG_ANSWER_WORDS = (
    10  # a longer answer counts as wrong in cem_le10 (a list of guesses earns CEM by covering)
)
# The JSON's names for scoring.paired_bootstrap's metrics, and the extra per-question ones.
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
REQUIRED = ("id", "golden_answers", "answer", "cem", "em", "f1", "format_ok", "n_searches")


class AnalysisError(Exception):
    """Evaluations that cannot be analysed, named with their file (or stage), line and field."""


@dataclass(frozen=True)
class PairRuns:
    """One seed pair: each arm's evaluated records (and where they came from, for errors) and training steps."""

    label: str
    records: Mapping[str, Sequence[dict[str, Any]]]
    sources: Mapping[str, str]
    steps: Mapping[str, int | None]


def check_rows(rows: Sequence[dict[str, Any]], source: str) -> None:
    if not rows:
        raise AnalysisError(f"{source}: no evaluated question")
    for number, row in enumerate(rows, 1):
        for name in REQUIRED:
            if name not in row:
                raise AnalysisError(f"{source}:{number}: no field {name!r}")


def answer_words(answer: str | None) -> int:
    return len(answer.split()) if answer else 0


def trajectory_steps(row: Mapping[str, Any]) -> int:
    """Steps of the trajectory (search and non-search) as its format's parser reads them."""
    if "text" not in row:
        return 0
    return len(parse(str(row.get("format") or "hiprag"), str(row["text"])).steps)


def question_row(row: Mapping[str, Any]) -> dict[str, Ratio]:
    """One evaluated question's contributions: scoring.paired_bootstrap's metrics (acc from the answer when the
    record predates it) and the gaming checks' per-question ones."""
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


def pooled_ratio(ratios: Mapping[str, Mapping[str, Ratio]], metric: str) -> float | None:
    numerator = sum(r[metric][0] for r in ratios.values())
    denominator = sum(r[metric][1] for r in ratios.values())
    return numerator / denominator if denominator else None


def arm_summary(rows: Sequence[dict[str, Any]], ratios: Mapping[str, Mapping[str, Ratio]]) -> dict[str, Any]:
    answers = [normalize_answer(r["answer"]) for r in rows if r["answer"] is not None]
    top, top_count = Counter(answers).most_common(1)[0] if answers else (None, 0)
    summary: dict[str, Any] = {
        "questions": len(rows),
        "answered": len(answers),
        "mean_answer_words": pooled_ratio(ratios, "answer_words"),
        "top_answer": top,
        "top_answer_share": top_count / len(rows),
        "steps_per_trajectory": pooled_ratio(ratios, "steps"),
    }
    for metric in ("average_searches", "osr", "redundant", "usr", "cem", "cem_le10", "acc", "em"):
        summary[NAMES[metric]] = pooled_ratio(ratios, metric)
    return summary


def _entry(d: Any) -> dict[str, Any]:
    return {k: getattr(d, k) for k in ("difference", "low", "high", "baseline", "method")}


def seed_pairs(
    runs: Sequence[PairRuns], baseline: str, method: str
) -> tuple[list[SeedPair], dict[str, Any], list[str]]:
    """The seed pairs of ``method`` against ``baseline``; every seed and arm must answer the same questions."""
    pairs, per_seed, expected, first = [], {}, None, ""
    for pair in runs:
        arms = {}
        for arm in (baseline, method):
            rows, source = pair.records[arm], pair.sources[arm]
            check_rows(rows, source)
            ids = [str(r["id"]) for r in rows]
            if len(set(ids)) != len(ids):
                raise AnalysisError(f"{source}: a question id is listed twice")
            if expected is None:
                expected, first = ids, source
            elif sorted(ids) != sorted(expected):
                raise AnalysisError(
                    f"{source}: {len(ids)} questions, not the {len(expected)} of {first} "
                    f"(every seed and arm must answer the same held-out questions)"
                )
            arms[arm] = (rows, {str(r["id"]): question_row(r) for r in rows})
        pairs.append(SeedPair(pair.label, arms[baseline][1], arms[method][1]))
        per_seed[pair.label] = {
            "steps": {arm: pair.steps.get(arm) for arm in (baseline, method)},
            **{arm: arm_summary(*arms[arm]) for arm in (baseline, method)},
        }
    assert expected is not None
    return pairs, per_seed, expected


def analyse(
    runs: Sequence[PairRuns],
    *,
    baseline: str = "outcome",
    method: str = "process",
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """The pooled and per-pair tables of ``method`` − ``baseline`` over the seed pairs, with the decision."""
    pairs, per_seed, ids = seed_pairs(runs, baseline, method)
    found: SeedBootstrap = seed_bootstrap(pairs, tuple(NAMES), n_resamples=n_resamples, seed=seed)
    steps = [s for info in per_seed.values() for s in info["steps"].values()]
    result: dict[str, Any] = {
        "name": f"{method} − {baseline}, paired by seed",
        "arms": {"baseline": baseline, "method": method},
        "seeds_per_arm": len(pairs),
        "min_steps_per_run": None if any(s is None for s in steps) else min(steps),
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
    result["decision"] = decide(result)
    return result


def decide(result: Mapping[str, Any]) -> dict[str, Any]:
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


def evaluation_table(
    evals: Mapping[str, Sequence[dict[str, Any]]], pairs: Sequence[tuple[str, str]], seed: int
) -> dict[str, Any]:
    """Each evaluation's pooled metrics and, for each (base, other) of ``pairs``, other − base with
    paired-bootstrap 95% intervals over the questions both answered."""
    ratios = {name: {str(r["id"]): question_row(r) for r in records} for name, records in evals.items()}
    rows = {name: {m: pooled_ratio(by_question, m) for m in METRICS} for name, by_question in ratios.items()}
    differences = {}
    for base, other in pairs:
        if base not in ratios or other not in ratios:
            continue
        keys, a, b = pair_by_key(ratios[base], ratios[other])
        found = paired_bootstrap(a, b, METRICS, seed=seed)
        differences[f"{other} − {base}"] = {
            "questions": len(keys),
            **{
                m: {k: getattr(d, k) for k in ("baseline", "method", "difference", "low", "high")}
                for m, d in found.items()
            },
        }
    return {"rows": rows, "differences": differences}


def trained_steps(stage: Path) -> int | None:
    """The last step a training stage's run spool reported (None: no such stage, or no step yet)."""
    if not stage.is_dir():
        return None
    done = 0
    try:
        for _, batch in run_spool.read_batches(stage):
            for row in batch.get("metrics") or ():
                with contextlib.suppress(KeyError, TypeError, ValueError):
                    done = max(done, int(row["step"]))
    except run_spool.SpoolFileError as exc:
        raise AnalysisError(f"{stage.parent.parent.name}/stages/{stage.name}/{exc}") from None
    return done or None


def spool_pairs(root: Path, manifest: Mapping[str, Any]) -> tuple[list[PairRuns], list[str]]:
    """The seed pairs of an experiment spool whose every arm's evaluation finished, and what the others lack."""
    arms = [str(a["name"]) for a in manifest.get("arms") or ()]
    runs, missing = [], []
    for seed in manifest.get("seeds") or ():
        keys = {arm: f"eval-{arm}-s{seed}" for arm in arms}
        lacking = [key for key in keys.values() if not stage_finished(root / "stages" / key)]
        if lacking:
            missing += lacking
            continue
        records = {arm: read_rows(root / "stages" / key / "records.jsonl") for arm, key in keys.items()}
        sources = {arm: f"{root.name}/stages/{key}/records.jsonl" for arm, key in keys.items()}
        steps = {arm: trained_steps(root / "stages" / f"train-{arm}-s{seed}") for arm in arms}
        runs.append(PairRuns(str(seed), records, sources, steps))
    return runs, missing
