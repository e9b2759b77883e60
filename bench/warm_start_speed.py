"""Warm-start training time, side by side: TRL's SFTTrainer (recipe 2) against the cached-frozen-layers trainer.

    python bench/warm_start_speed.py --questions ../shared/data/wiki_multihop/questions.jsonl [--per-method 12]
        [--steps 3] [--trainable-layers 10] [--index PATH] [--base PATH]

One process, one set of demonstrations (the demo's methods, ``--per-method`` questions each, the demo's settings),
each arm from a fresh copy of the base model for ``--steps`` optimizer steps of 8 demonstrations, timed in this
process's CPU seconds (``--clock wall`` for wall seconds): on a machine shared with other jobs the wall clock
measures their load too. Prints each arm's seconds per step (TRL's first step, which carries its set-up, and a
short last step left out), the cached arm's one-off pass of the frozen layers, and a full demo warm start's
training time estimated from them (``--full-examples`` demonstrations, ``--epochs`` epochs): the ratio the issue
asks for (≤ 0.4).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
VAR = Path(os.environ.get("SEARCHLAB_VAR_DIR", REPO / "var"))


def parse_arm(
    arm: str, layers: int, epochs: float, parser: argparse.ArgumentParser
) -> tuple[str, int, float]:
    """``kind[:layers[:epochs]]`` as (kind, trainable layers, epochs of the full run estimated), or a usage error
    naming the arm, before minutes of demonstrations."""
    parts = arm.split(":")
    try:
        if parts[0] not in ("trl", "cached") or len(parts) > 3:
            raise ValueError
        n = int(parts[1]) if len(parts) > 1 and parts[1] else layers
        e = float(parts[2]) if len(parts) > 2 else epochs
        if n < 0 or not 0 < e < 1000:
            raise ValueError
    except ValueError:
        parser.error(
            f"--arms {arm!r}: expected trl or cached, then optionally :LAYERS (>= 0) and :EPOCHS (> 0)"
        )
    return parts[0], n, e


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--index", type=Path, default=VAR / "retrieval" / "indexes" / "wiki_multihop-bm25")
    parser.add_argument("--base", type=Path, default=VAR / "models" / "SmolLM2-135M-Instruct")
    parser.add_argument("--per-method", type=int, default=12)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--trainable-layers", type=int, default=10)
    parser.add_argument(
        "--arms",
        default="trl,cached,trl,cached",
        help="the arms in the order they run: trl or cached, optionally :N trainable layers (cached:6) and :E epochs "
        "of the full run estimated for it (cached:30:2.5; default --epochs); an arm named twice runs twice and its "
        "steps are pooled, so a machine whose load changes affects both alike",
    )
    parser.add_argument("--epochs", type=float, default=3.0, help="epochs of the full run estimated")
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="process CPU seconds (default) or wall seconds",
    )
    parser.add_argument(
        "--full-examples", type=int, default=112, help="demonstrations of the full run estimated"
    )
    args = parser.parse_args()
    arms = {arm: parse_arm(arm, args.trainable_layers, args.epochs, parser) for arm in args.arms.split(",")}
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from retrieval.api import searcher_for_index
    from retrieval.index import IndexConfig, build_index
    from trainer import warm_start
    from trainer.config import ModelConfig
    from trainer.models import load_policy
    from trainer.progress import ProgressReporter

    torch.set_num_threads(2)
    if not (args.index / "metadata.json").is_file():
        build_index(args.questions.parent / "corpus.jsonl", args.index, IndexConfig(kind="bm25"))
    folder = Path(tempfile.mkdtemp(prefix="warm-speed-"))
    per_step = 8
    config = warm_start.warm_start_config(
        {
            "output_dir": str(folder),
            "index": str(args.index),
            "model": {"path": str(args.base)},
            "data": {"path": str(args.questions), "split": "train", "questions_per_method": args.per_method},
            "methods": list(warm_start.DEMO_METHODS),
            "training": {"trainable_layers": args.trainable_layers},
        }
    )
    _, tokenizer = load_policy(ModelConfig(path=str(args.base)))
    plans = warm_start.choose_plans(
        config, warm_start.read_rows(args.questions), warm_start.read_rows(warm_start.COMMON_KNOWLEDGE)
    )
    progress = ProgressReporter(folder)
    examples, _ = warm_start.demonstration_examples(
        config, tokenizer, searcher_for_index(args.index), plans, folder, progress
    )
    tokens = sum(len(e["input_ids"]) for e in examples)
    print(f"{len(examples)} demonstrations, {tokens / len(examples):.0f} tokens on average")
    epochs = args.steps * per_step / len(examples)
    steps_of: dict[str, list[float]] = {}
    once_of: dict[str, list[float]] = {}
    for arm in args.arms.split(","):
        kind, layers, _ = arms[arm]
        model, _ = load_policy(ModelConfig(path=str(args.base)))
        arm_config = warm_start.warm_start_config(
            {
                **config.to_dict(),
                "output_dir": str(folder / arm),
                "training": {
                    **config.to_dict()["training"],
                    "epochs": epochs,
                    "cache_frozen_layers": kind == "cached",
                    "trainable_layers": layers,
                },
            }
        )
        (folder / arm).mkdir(exist_ok=True)
        # CPU seconds of this process (both torch threads), not wall time: on a machine shared with other jobs
        # the wall clock measures their load as much as ours.
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        reporter = ProgressReporter(folder / arm, clock=clock, min_interval=0)
        started = clock()
        warm_start._train(arm_config, model, tokenizer, examples, reporter)
        seconds = clock() - started
        steps = list(reporter.step_seconds)
        # A step shorter than 8 demonstrations ends each epoch (both trainers): left out of both arms alike, as is
        # TRL's first step, which carries its set-up.
        per_epoch, short = -(-len(examples) // per_step), len(examples) % per_step
        full = [x for i, x in enumerate(steps) if not (short and (i + 1) % per_epoch == 0)]
        full = full[1:] if kind == "trl" else full
        steps_of.setdefault(arm, []).extend(full)
        once_of.setdefault(arm, []).append(seconds - sum(steps))
        print(f"{arm}: steps {[round(x, 1) for x in steps]} s, outside steps {seconds - sum(steps):.1f} s")
        del model
    results = {
        arm: {"mean_step": statistics.mean(steps_of[arm]), "once": statistics.mean(once_of[arm])}
        for arm in steps_of
    }
    base_arm = next((a for a in results if a.startswith("trl")), None)

    def full_steps(arm: str) -> int:  # as step_batches counts them
        return max(1, round(arms[arm][2] * -(-int(args.full_examples) // per_step)))

    for arm, result in results.items():
        if base_arm is None or arm == base_arm:
            continue
        old = results[base_arm]["mean_step"] * full_steps(base_arm)
        new = result["mean_step"] * full_steps(arm) + result["once"] / len(examples) * args.full_examples
        print(
            f"{arm} against {base_arm}: per step {result['mean_step']:.1f} s vs {results[base_arm]['mean_step']:.1f} s; "
            f"a full demo warm start ({args.full_examples} demonstrations, {full_steps(arm)} steps against "
            f"{full_steps(base_arm)}): {new:.0f} s vs {old:.0f} s, ratio {new / old:.2f}"
        )
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
