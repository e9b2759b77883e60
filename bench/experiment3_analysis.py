"""Experiment #3's analysis (docs/results/experiment-3.md): an experiment spool's evaluations into the per-pair and
pooled tables.

OUT is the experiment spool ``python -m trainer.jobs experiment --seeds N`` writes: each seed pair's evaluations
(``stages/eval-<arm>-s<k>/records.jsonl``: the arms trained from the same start with the same questions in the same
order, evaluated on the same held-out questions) and its training stages (the steps each run reached). Writes
``--json`` (default docs/results/experiment-3.json) and prints the tables in Markdown (``trainer.jobs.analysis``):

* the pooled method − baseline differences over seed pairs with their two-level 95% intervals
  (``scoring.seed_bootstrap``: seed pairs, then questions): #Search, the redundant-search rate (HiPRAG Eq. 2's OSR:
  search steps the judge flags as over-search over judged search steps; undefined for an arm that never searches,
  so redundant searches per question beside it), CEM, FlashRAG's acc, EM, and the gaming checks that have a
  per-question form (USR, CEM counting answers of more than 10 words as wrong, answer length in words, steps per
  trajectory);
* the table per seed pair (each pair's one-level paired interval) and whether every pair has the pooled sign;
* per arm and seed: mean answer length, the most common answer and its share, steps per trajectory, USR;
* the decision rule's verdict (docs/results/experiment-3.md, "Decision rule").

    .venv/bin/python bench/experiment3_analysis.py OUT [--split demo/experiment3_split.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from trainer.jobs import analysis as core  # noqa: E402
from trainer.jobs.analysis import AnalysisError, decide, spool_pairs  # noqa: E402
from trainer.jobs.report import pooled_markdown as markdown  # noqa: E402
from trainer.jobs.spool import read_json  # noqa: E402

__all__ = ["AnalysisError", "analyse", "decide", "main", "markdown"]


def analyse(
    out: Path,
    *,
    split: Path | None = None,
    method: str = "",
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """The pooled and per-pair tables of ``method`` (default: the first arm after the baseline) − the baseline
    over the spool's complete seed pairs; the split's checksum and sizes with ``split`` (every evaluated question
    must be held out)."""
    manifest = read_json(out / "manifest.json")
    if manifest is None or manifest.get("format") != "searchlab-experiment-spool":
        raise AnalysisError(f"{out}/manifest.json: not an experiment spool's manifest")
    baseline = str(manifest["baseline"])
    others = [str(a["name"]) for a in manifest["arms"] if a["name"] != baseline]
    method = method or others[0]
    if method not in others:
        raise AnalysisError(
            f"{out}: no arm {method!r} beside the baseline {baseline!r} ({', '.join(others)})"
        )
    runs, missing = spool_pairs(out, manifest)
    if missing:
        print(f"left out (not finished): {', '.join(missing)}", file=sys.stderr)
    if not runs:
        raise AnalysisError(f"{out}: no seed pair whose every evaluation finished")
    result = core.analyse(runs, baseline=baseline, method=method, n_resamples=n_resamples, seed=seed)
    result["spool"] = {
        "id": manifest.get("id"),
        "name": manifest.get("name"),
        "status": manifest.get("status"),
    }
    if split is not None:
        result["split"] = split_summary(split, [str(r["id"]) for r in runs[0].records[baseline]])
    return result


def split_summary(split: Path, evaluated: list[str]) -> dict[str, Any]:
    data = json.loads(split.read_text(encoding="utf-8"))
    outside = sorted(set(evaluated) - set(data["held_out"]))
    if outside:
        raise AnalysisError(
            f"{split}: {len(outside)} evaluated questions are not held out, e.g. {outside[0]!r}"
        )
    shown = split.resolve().relative_to(REPO) if split.resolve().is_relative_to(REPO) else split
    return {
        "file": str(shown),
        "sha256": hashlib.sha256(split.read_bytes()).hexdigest(),
        "salt": data["salt"],
        "held_out": len(data["held_out"]),
        "train": len(data["train"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out", type=Path, help="the experiment spool (python -m trainer.jobs experiment's --out)"
    )
    parser.add_argument("--split", type=Path, help="the split (demo/experiment3_split.json) the run used")
    parser.add_argument(
        "--method", default="", help="the arm compared with the baseline (default: the first)"
    )
    parser.add_argument("--json", type=Path, default=REPO / "docs" / "results" / "experiment-3.json")
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    args = parser.parse_args(argv)
    try:
        result = analyse(
            args.out, split=args.split, method=args.method, n_resamples=args.resamples, seed=args.seed
        )
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
