"""A stand-in for ``python -m trainer.train CONFIG``: writes metrics.jsonl / samples.jsonl like trainer.callbacks.

    python fake_trainer.py CONFIG [--steps N] [--sleep S] [--exit CODE] [--ignore-sigint] [--hang] [--samples N]

``--ignore-sigint`` makes it deaf to the cooperative stop, so only SIGKILL ends it; ``--hang`` sleeps forever after
the last step (a trainer that never finishes); ``--samples N`` writes N samples at every step (default: one, at
step 1).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

TEXT = (
    "<think>\n<step>\n    <reasoning>Look up.</reasoning>\n    <search>capital of France</search>\n"
    "    <context>Doc 1(Title: Paris) Paris is the capital of France.</context>\n"
    "    <conclusion>It says Paris.</conclusion>\n</step>\n<step>\n    <reasoning>I know it.</reasoning>\n"
    "    <conclusion>It is Paris.</conclusion>\n</step>\n</think>\n<answer>Paris</answer>"
)


def append(path: Path, rows: list[dict]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--ignore-sigint", action="store_true")
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--samples", type=int, default=0)
    args = parser.parse_args()
    if args.ignore_sigint:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:  # as trainer.train does (trainer.stop): hear the stop even when started with SIGINT ignored
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config = json.loads(Path(args.config).read_text())
    out = Path(config["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    print("fake trainer starting", flush=True)
    for step in range(1, args.steps + 1):
        now = time.time()
        metrics = {"reward/mean": 0.1 * step, "reward/std": 0.05, "osr": 0.25, "usr": 0.5, "kl": float("nan")}
        append(
            out / "metrics.jsonl",
            [{"step": step, "time": now, "key": k, "value": v} for k, v in metrics.items()],
        )
        if step == 1 or args.samples:
            step_rows = [
                {"index": 0, "verdicts": [{"detector": "over_search", "outcome": "true"}]},
                {"index": 1, "verdicts": [{"detector": "under_search", "outcome": "unparseable"}]},
            ]
            sample = {
                "step": step,
                "question": "What is the capital of France?",
                "question_id": "q-paris",
                "golden_answers": ["Paris"],
                "text": TEXT,
                "reward": 0.7,
                "components": {"format": 1.0},
                "step_rewards": [0.2, 0.5],
                "steps": step_rows,
            }
            append(out / "samples.jsonl", [sample] * max(1, args.samples))
        print(f"step {step} done", flush=True)
        time.sleep(args.sleep)
    if args.exit:
        print("Traceback (most recent call last):\nRuntimeError: fake failure", file=sys.stderr, flush=True)
    while args.hang:
        time.sleep(0.05)
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
