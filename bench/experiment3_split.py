"""Experiment #3's split (issue 35): NQ's 2,676 questions into a held-out set and a training pool, by a hash of the id.

The held-out set holds the H100 run's 200 held-out questions (the ids of ``out/eval_questions.jsonl`` in the kept
bundle ``docs/experiments/experiment2-h100-2026-11-27.tar.gz``, which are the first 200 questions of the ``test``
split in file order, as ``manage.py experiment --eval-split test --eval-limit 200`` picks them: the script checks
both) and then the NQ questions of lowest hash up to ``--held-out`` questions; the training pool is the other NQ
questions without the guessable and echo ones (``scoring.splits``). Writes ``demo/experiment3_split.json``: the
source file's SHA-256, the salt, the sizes, the counts left out and why, and every id. ``--rows DIR`` also writes
``DIR/held_out.jsonl`` and ``DIR/train.jsonl`` (the question rows, for ``python -m trainer.jobs experiment``); ``--check``
verifies the committed file instead of writing it.

    .venv/bin/python bench/experiment3_split.py            # writes demo/experiment3_split.json, prints the counts
    .venv/bin/python bench/experiment3_split.py --check    # exit 1 if the committed split differs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tarfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scoring.splits import DEFAULT_HELD_OUT_SIZE, DEFAULT_SALT, DEFAULT_SOURCE, split_questions  # noqa: E402

SHARED = Path(os.environ.get("SEARCHLAB_SHARED_DIR", REPO.parent / "shared"))
QUESTIONS = SHARED / "data" / "wiki_multihop" / "questions.jsonl"
BUNDLE = REPO / "docs" / "experiments" / "experiment2-h100-2026-11-27.tar.gz"
BUNDLE_EVAL_FILES = ("eval_questions", "eval_start", "eval_trained_outcome", "eval_trained_process")
OUT = REPO / "demo" / "experiment3_split.json"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise SystemExit(f"{path}:{number}: not JSON ({error.msg})") from None
    return rows


def bundle_eval_ids(bundle: Path) -> list[str]:
    """The held-out ids of an experiment bundle: those of ``out/eval_questions.jsonl``, checked equal (same order)
    in each evaluation JSONL the bundle holds."""
    found: dict[str, list[str]] = {}
    with tarfile.open(bundle) as tar:
        for member in tar.getmembers():
            stem = Path(member.name).stem
            if member.isfile() and Path(member.name).suffix == ".jsonl" and stem in BUNDLE_EVAL_FILES:
                handle = tar.extractfile(member)
                assert handle is not None
                found[stem] = [json.loads(line)["id"] for line in handle.read().decode().splitlines() if line]
    if "eval_questions" not in found:
        raise SystemExit(f"{bundle}: no out/eval_questions.jsonl")
    ids = found["eval_questions"]
    for stem, other in found.items():
        if other != ids:
            raise SystemExit(f"{bundle}: {stem}.jsonl holds other questions than eval_questions.jsonl")
    return ids


def build(
    questions: Path, bundle: Path, *, held_out: int, salt: str, source: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rows = read_jsonl(questions)
    anchors = bundle_eval_ids(bundle)
    test_first = [r["id"] for r in rows if str((r.get("metadata") or {}).get("split", "")).startswith("test")]
    split = split_questions(rows, source=source, held_out_size=held_out, anchors=anchors, salt=salt)
    summary = split.summary()
    anchors_rule = (
        "the first 200 questions of the test split (file order), as manage.py experiment --eval-split test "
        "--eval-limit 200 picks them"
        if anchors == test_first[: len(anchors)]
        else "not the first questions of the test split"
    )
    return {
        "name": "Experiment #3 split (issue 35)",
        "script": "bench/experiment3_split.py",
        "questions_file": "data/wiki_multihop/questions.jsonl",
        "questions_sha256": hashlib.sha256(questions.read_bytes()).hexdigest(),
        "anchors_from": f"{bundle.relative_to(REPO) if bundle.is_relative_to(REPO) else bundle}: out/eval_*.jsonl",
        "anchors_are": anchors_rule,
        **summary,
    }, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--held-out", type=int, default=DEFAULT_HELD_OUT_SIZE)
    parser.add_argument("--salt", default=DEFAULT_SALT)
    parser.add_argument("--source", default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--rows", type=Path, help="also write held_out.jsonl and train.jsonl here")
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = parser.parse_args(argv)
    data, rows = build(
        args.questions, args.bundle, held_out=args.held_out, salt=args.salt, source=args.source
    )
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    counts = data["counts"]
    print(
        f"{args.source}: {counts['source']} questions; held out {counts['held_out']} "
        f"({counts['anchors']} anchors: {data['anchors_are']}); training pool {counts['train']}; "
        f"left out of training {counts['left_out_of_training']}; held out though excludable "
        f"{counts['held_out_excludable']}; salt {data['salt']!r}"
    )
    if args.check:
        if not args.out.is_file() or args.out.read_text(encoding="utf-8") != text:
            print(f"{args.out} differs from the split these inputs give", file=sys.stderr)
            return 1
        print(f"{args.out} matches")
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    if args.rows:
        by_id = {r["id"]: r for r in rows}
        args.rows.mkdir(parents=True, exist_ok=True)
        for name in ("held_out", "train"):
            lines = "".join(json.dumps(by_id[qid], ensure_ascii=False) + "\n" for qid in data[name])
            (args.rows / f"{name}.jsonl").write_text(lines, encoding="utf-8")
        print(f"wrote {args.rows}/held_out.jsonl and train.jsonl")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
