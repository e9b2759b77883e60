"""Does the warm start teach the format? Format-ok of the base and the warm-started policy, agent rollout, greedy.

    python bench/warm_start.py --questions ../shared/data/wiki_multihop/questions.jsonl [--limit 40]
        [--method hiprag] [--index PATH] [--base PATH] [--warm PATH] [--temperature T --seed S]

Both models roll out the same questions with the method's real loop against the same index and the demo's budgets
(trainer.config's rollout defaults, 512 tokens per rollout), at temperature 0. Questions the warm start saw (its
``demonstrations.jsonl``) and the file's train split are left out, so the figure is on unseen questions. A
trajectory is format-ok when it parses as valid in scoring's paper mode. Prints ``format-ok base: X`` and
``format-ok warm: Y`` (target: Y ≥ 0.9 on 40 questions), with seconds per rollout and how the rollouts ended.
``--temperature`` samples instead (seeded per turn with ``--seed``): what RL training sees, where greedy decoding is
what an evaluation sees; a small model can copy its own last turn under greedy decoding and not when it samples.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
VAR = Path(os.environ.get("SEARCHLAB_VAR_DIR", REPO / "var"))


def questions(path: Path, seen: set[str], limit: int) -> list[Any]:
    from agent.rollout import Question

    out = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            metadata = row.get("metadata") or {}
            if str(row.get("id")) in seen or str(metadata.get("split", "")).startswith("train"):
                continue
            out.append(
                Question(
                    id=str(row["id"]),
                    text=row["question"],
                    golds=tuple(row["golden_answers"]),
                    dataset=str(metadata.get("data_source", "")),
                )
            )
            if len(out) == limit:
                break
    return out


def measure(
    model: Path, method: str, qs: list[Any], searcher: Any, args: argparse.Namespace
) -> dict[str, Any]:
    from agent.backend_transformers import TransformersBackend
    from agent.rollout import PAPER_CONFIGS, rollout_questions
    from scoring.formats import parse
    from trainer.config import RolloutConfig as Budgets

    budgets = Budgets()
    config = replace(
        PAPER_CONFIGS[method],
        temperature=args.temperature,
        seed=args.seed if args.temperature > 0 else None,
        max_turns=args.max_turns or budgets.max_turns,
        max_new_tokens=budgets.max_turn_tokens,
        max_rollout_tokens=args.rollout_tokens,
        max_obs_tokens=budgets.max_obs_tokens,
        topk=budgets.topk,
    )
    backend = TransformersBackend.from_pretrained(str(model), threads=2)
    started = time.perf_counter()
    rollouts = rollout_questions(backend, searcher, method, qs, config)
    seconds = time.perf_counter() - started
    trajectories = [parse(r.format, r.text) for r in rollouts]
    return {
        "format_ok": sum(t.valid for t in trajectories) / len(trajectories),
        "searches": sum(t.n_searches for t in trajectories if t.valid)
        / max(1, sum(t.valid for t in trajectories)),
        "seconds_per_rollout": seconds / len(rollouts),
        "ends": Counter(r.end for r in rollouts),
        "why_invalid": Counter(t.error.reason for t in trajectories if t.error is not None),
        "invalid": [
            {"question": r.question.id, "end": r.end, "error": str(t.error), "text": r.text}
            for r, t in zip(rollouts, trajectories, strict=True)
            if t.error is not None
        ],
        "example": rollouts[0].text,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--method", default="hiprag")
    parser.add_argument("--index", type=Path, default=VAR / "retrieval" / "indexes" / "wiki_multihop-bm25")
    parser.add_argument("--base", type=Path, default=VAR / "models" / "SmolLM2-135M-Instruct")
    parser.add_argument("--warm", type=Path, default=VAR / "models" / "SmolLM2-135M-Instruct-warm")
    parser.add_argument("--show", action="store_true", help="print the first rollout of each model")
    parser.add_argument("--max-turns", type=int, default=0, help="turn budget (default: the demo's)")
    parser.add_argument(
        "--rollout-tokens", type=int, default=512, help="tokens per rollout (the demo's: 512)"
    )
    parser.add_argument(
        "--temperature", type=float, default=0.0, help="sampling temperature (default 0: greedy)"
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (with --temperature > 0)")
    parser.add_argument("--only", choices=("base", "warm"), help="measure one model")
    parser.add_argument(
        "--invalid",
        type=Path,
        help="write each model's invalid rollouts (text and parse error) to this JSONL",
    )
    args = parser.parse_args()
    if args.temperature < 0:
        parser.error(f"--temperature {args.temperature}: must be 0 (greedy) or more")
    if not args.questions.is_file():
        parser.error(f"--questions {args.questions}: no such file")
    if args.invalid:
        try:  # before minutes of rollouts, not after them
            args.invalid.open("a", encoding="utf-8").close()
        except OSError as error:
            parser.error(f"--invalid {args.invalid}: cannot write there ({error.strerror})")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from retrieval.api import searcher_for_index

    seen: set[str] = set()
    demos = args.warm / "demonstrations.jsonl"
    if demos.is_file():
        seen = {json.loads(line)["question_id"] for line in demos.read_text(encoding="utf-8").splitlines()}
    qs = questions(args.questions, seen, args.limit)
    searcher = searcher_for_index(args.index)
    decoding = "greedy" if args.temperature <= 0 else f"temperature {args.temperature}, seed {args.seed}"
    print(
        f"method={args.method} questions={len(qs)} (none seen by the warm start) index={args.index} "
        f"decoding={decoding}"
    )
    for name, model in (("base", args.base), ("warm", args.warm)):
        if args.only and name != args.only:
            continue
        result = measure(model, args.method, qs, searcher, args)
        ends = ", ".join(f"{k} {v}" for k, v in sorted(result["ends"].items()))
        print(
            f"format-ok {name}: {result['format_ok']:.3f}  ({result['seconds_per_rollout']:.1f} s/rollout, "
            f"{result['searches']:.2f} searches per valid trajectory; ends: {ends})"
        )
        why = "; ".join(f"{reason} ×{n}" for reason, n in result["why_invalid"].most_common())
        print(f"  invalid {name}: {why or 'none'}")
        if args.invalid:
            with args.invalid.open("a", encoding="utf-8") as handle:
                for row in result["invalid"]:
                    handle.write(json.dumps({"model": name, **row}, ensure_ascii=False) + "\n")
        if args.show:
            print(result["example"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
