"""Seconds per training step: our trainer against bare TRL GRPO, same model, batch and rollout; and peak memory.

    python -m bench.training [--model PATH] [--method hiprag] [--rollout scripted|generate] [--steps 4]
    python bench/training.py --rollout agent --steps 1 [--judge evidence|policy|none] [--index PATH]

With ``--rollout agent`` it times what a user's run does instead: the method's real rollout loop against an index
(default: a flat MiniLM index of the demo corpus, built into a temporary folder), the judge, the demo's budgets
(trainer.config's rollout defaults) and batch (2 questions × 4 rollouts), the warm-started SmolLM2 when
``var/models/SmolLM2-135M-Instruct-warm`` exists; it prints the seconds of each phase from the trainer's heartbeat
(trainer.progress), ``s/step`` and the reward spread inside GRPO groups (no spread: no learning signal).

Each arm runs in its own subprocess (so peak RSS is its own): *bare* is TRL's ``GRPOTrainer`` with our rollout
function and a one-line reward; *ours* is ``trainer.train.build_trainer`` — the method's reward adapter over scoring,
the score ledger, advantage shaping, the metrics/samples callback writing JSON lines. The first step is a warm-up
and is not timed. Target: overhead ≤ 10 %. The model defaults to var/models/SmolLM2-135M-Instruct when
``python -m agent.setup_model`` has made it, else the tiny random model.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python bench/training.py` as well as `python -m bench.training`
    sys.path.insert(0, str(REPO))
VAR = Path(os.environ.get("SEARCHLAB_VAR_DIR", REPO / "var"))
SMOLLM2 = VAR / "models" / "SmolLM2-135M-Instruct"
SMOLLM2_WARM = VAR / "models" / "SmolLM2-135M-Instruct-warm"
DEMO = REPO / "demo"

from trainer.config import DEMO_TRAINABLE_LAYERS  # noqa: E402  (after the path: `python bench/training.py`)


def _config(args: argparse.Namespace, output_dir: str) -> Any:
    from trainer.config import config_from_dict

    return config_from_dict(
        {
            "output_dir": output_dir,
            "method": args.method,
            "model": {"path": args.model, "torch_threads": args.threads},
            "rollout": {"factory": args.rollout, "max_turns": 2, "max_turn_tokens": args.turn_tokens},
            "training": {
                "max_steps": args.steps + 1,
                "learning_rate": 1e-6,
                "per_device_train_batch_size": args.batch,
                "num_generations": args.generations,
                "seed": 0,
            },
            "logging": {"sample_every": 1, "samples_per_log": 4},
        }
    )


def _arm(args: argparse.Namespace) -> dict[str, float]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.ends: list[float] = []

        def on_step_end(self, *_: Any, **__: Any) -> None:
            self.ends.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as output_dir:
        config = _config(args, output_dir)
        clock = StepClock()
        if args.arm == "ours":
            from trainer.train import build_trainer

            trainer = build_trainer(config)
        else:
            from datasets import Dataset
            from trl import GRPOTrainer

            from trainer.algorithms import grpo_args
            from trainer.models import load_policy
            from trainer.rollout import make_rollout_func
            from trainer.train import load_rows, make_rollout

            torch.set_num_threads(args.threads)
            torch.manual_seed(0)
            model, tokenizer = load_policy(config.model)
            rows = load_rows(config)

            def length_reward(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
                return [float(len(str(c)) % 7) for c in completions]

            trainer = GRPOTrainer(
                model=model,
                reward_funcs=[length_reward],
                args=grpo_args(config),
                train_dataset=Dataset.from_list(rows),
                processing_class=tokenizer,
                rollout_func=make_rollout_func(make_rollout(config, model, tokenizer), rows),
            )
        trainer.add_callback(clock)
        start = time.perf_counter()
        trainer.train()
        ends = [start, *clock.ends]
    timed = [b - a for a, b in itertools.pairwise(ends[1:])]  # drop the warm-up step
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds_per_step": sum(timed) / len(timed), "peak_rss_mb": peak_mb, "steps": len(timed)}


def _agent_run(args: argparse.Namespace) -> int:
    """One training run on the agent rollout; the phases' seconds come from the trainer's own heartbeat."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import TrainerCallback

    from trainer.config import config_from_dict
    from trainer.progress import read_progress
    from trainer.train import build_trainer

    class GroupSpread(TrainerCallback):  # type: ignore[misc]
        """TRL's own log: the mean reward std inside groups and the share of groups with none."""

        def __init__(self) -> None:
            self.rows: list[dict[str, float]] = []

        def on_log(self, _args: Any, _state: Any, _control: Any, logs: Any = None, **__: Any) -> None:
            if logs and "reward_std" in logs:
                self.rows.append(
                    {k: float(logs[k]) for k in ("reward", "reward_std", "frac_reward_zero_std")}
                )

    if args.no_prefix_cache:
        from agent.backend_transformers import TransformersBackend

        TransformersBackend.reuse_prefix = False
    with tempfile.TemporaryDirectory() as scratch:
        index = args.index
        if not index:
            from retrieval.index import IndexConfig, build_index

            index = str(Path(scratch) / "demo-index")
            build_index(DEMO / "corpus.jsonl", index, IndexConfig(kind="flat"))
        judge: Any = None if args.judge == "none" else args.judge
        options: dict[str, Any] = {"index": index}
        if judge:
            options["judge"] = judge
        config = config_from_dict(
            {
                "output_dir": str(Path(scratch) / "run"),
                "method": args.method,
                "model": {
                    "path": args.model,
                    "torch_threads": args.threads,
                    "trainable_layers": args.trainable_layers,
                },
                "data": {"path": str(args.questions)},
                # the demo's budgets
                "rollout": {"factory": "agent", "options": options, "engine": args.engine},
                "training": {
                    "max_steps": args.steps,
                    "learning_rate": 1e-5,
                    "per_device_train_batch_size": args.batch,
                    "num_generations": args.generations,
                    "seed": 0,
                },
                "logging": {"sample_every": 1, "samples_per_log": args.batch},
            }
        )
        spread = GroupSpread()
        started = time.perf_counter()
        trainer = build_trainer(config)
        loaded = time.perf_counter()
        trainer.add_callback(spread)
        trainer.train()
        finished = time.perf_counter()
        heartbeat = read_progress(config.output_dir) or {}
        samples = [
            json.loads(line)
            for line in (Path(config.output_dir) / "samples.jsonl").read_text(encoding="utf-8").splitlines()
        ]
    phases = heartbeat.get("phase_seconds", {})
    r = config.rollout
    print(
        f"model={args.model} method={args.method} judge={args.judge} batch={args.batch} "
        f"generations={args.generations} engine={args.engine} trainable_layers={args.trainable_layers} "
        f"prefix_cache={not args.no_prefix_cache} budgets: turns={r.max_turns} turn_tokens={r.max_turn_tokens} "
        f"rollout_tokens={r.max_rollout_tokens or config.training.max_completion_length} "
        f"obs_tokens={r.max_obs_tokens} topk={r.topk}"
    )
    print(f"load: {loaded - started:.1f} s")
    for phase in ("generate", "retrieve", "judge", "update"):
        print(f"phase {phase}: {phases.get(phase, 0.0):.1f} s")
    print(f"s/step: {(finished - loaded) / args.steps:.1f}")
    ends: dict[str, int] = {}
    for sample in samples:
        ends[sample.get("end") or "?"] = ends.get(sample.get("end") or "?", 0) + 1
    ok = sum(bool(sample.get("format_ok")) for sample in samples)
    print(
        f"format-ok: {ok}/{len(samples)}; rollout ends: {', '.join(f'{k} {v}' for k, v in sorted(ends.items()))}"
    )
    for step, row in enumerate(spread.rows, start=1):
        print(
            f"step {step}: reward mean {row['reward']:.3f}, std inside groups {row['reward_std']:.3f}, "
            f"groups with no spread {row['frac_reward_zero_std']:.2f}"
        )
    return 0


def _default_model() -> str:
    for folder in (SMOLLM2_WARM, SMOLLM2):
        if (folder / "config.json").is_file():
            return str(folder)
    return "tiny-random"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="default: the warm-started SmolLM2, else SmolLM2, else tiny-random")
    parser.add_argument("--method", default="hiprag")
    parser.add_argument("--rollout", default="scripted", choices=("scripted", "generate", "agent"))
    parser.add_argument("--judge", default="evidence", help="agent rollout: evidence | policy | none")
    parser.add_argument(
        "--index", help="agent rollout: an index folder (default: the demo corpus, flat MiniLM)"
    )
    parser.add_argument(
        "--questions", default=str(DEMO / "questions.jsonl"), help="agent rollout: FlashRAG questions"
    )
    parser.add_argument(
        "--trainable-layers",
        type=int,
        default=DEMO_TRAINABLE_LAYERS,
        help="agent rollout: train the top N layers (default: the new-run form's; 0: every weight)",
    )
    parser.add_argument(
        "--engine",
        default="transformers",
        choices=("transformers", "vllm"),
        help="agent rollout: what generates (vllm needs .venv-vllm; docs/vllm.md)",
    )
    parser.add_argument(
        "--no-prefix-cache",
        action="store_true",
        help="agent rollout, transformers engine: encode every row's whole context each turn (the baseline)",
    )
    parser.add_argument("--steps", type=int, default=4, help="timed steps (one more is run as warm-up)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=24)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--repeats", type=int, default=1, help="alternate the arms this many times, keep the best"
    )
    parser.add_argument("--arm", choices=("bare", "ours"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        args.model = (
            _default_model()
            if args.rollout == "agent"
            else (str(SMOLLM2) if (SMOLLM2 / "config.json").is_file() else "tiny-random")
        )
    if args.rollout == "agent":
        return _agent_run(args)
    if args.arm:
        print(json.dumps(_arm(args)))
        return 0

    results: dict[str, list[dict[str, float]]] = {"bare": [], "ours": []}
    passthrough = [a for a in sys.argv[1:] if a != "--arm"]
    for _ in range(args.repeats):
        for arm in ("bare", "ours"):
            done = subprocess.run(
                [sys.executable, "-m", "bench.training", *passthrough, "--arm", arm],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return done.returncode
            results[arm].append(json.loads(done.stdout.strip().splitlines()[-1]))
    bare = min(results["bare"], key=lambda r: r["seconds_per_step"])
    ours = min(results["ours"], key=lambda r: r["seconds_per_step"])
    overhead = 100 * (ours["seconds_per_step"] / bare["seconds_per_step"] - 1)
    print(
        f"model={args.model} method={args.method} rollout={args.rollout} batch={args.batch} "
        f"generations={args.generations} threads={args.threads} timed_steps={args.steps}"
    )
    print(f"{'arm':<6} {'s/step':>8} {'peak RSS MB':>12}")
    for name, row in (("bare", bare), ("ours", ours)):
        print(f"{name:<6} {row['seconds_per_step']:>8.3f} {row['peak_rss_mb']:>12.0f}")
    print(f"overhead {overhead:+.1f}% (target ≤ 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
