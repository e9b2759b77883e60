"""A training run with validation every step and two trackers, read back from its metrics file, Trackio and MLflow.

    python bench/trackers_validation.py [--steps 3] [--questions 4] [--keep DIR] [--baseline]

Runs ``python -m trainer.train`` on a config of the tiny random model (so it fits a CPU in a minute) with the real
pieces around it: HiPRAG's agent rollout against the wiki_multihop BM25 index, the evidence judge,
``validation.every_steps = 1`` over the last ``--questions`` questions of wiki_multihop (held out of training) and
``trackers = ["trackio", "mlflow"]``. It then reads the run back three ways — ``metrics.jsonl`` (what the web app
plots), Trackio's database and MLflow's file store under ``<output_dir>/trackers/`` — and prints, per step, the
training reward and the held-out metrics from each, then the wall time of the run (``--baseline``: also of the same
run without validation or trackers, run first). The tiny model writes no answer,
so its accuracies are 0; the point is that every value reaches every tracker, step for step.

The index is ``$SEARCHLAB_MODEL_CACHE/retrieval/indexes/wiki_multihop-bm25`` (``make demo`` builds it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
CACHE = Path(os.environ.get("SEARCHLAB_MODEL_CACHE", Path.home() / ".cache" / "searchlab"))
INDEX = CACHE / "retrieval" / "indexes" / "wiki_multihop-bm25"
SHARED = Path(os.environ.get("SEARCHLAB_SHARED_DIR", REPO.parent / "shared"))
QUESTIONS = SHARED / "data" / "wiki_multihop" / "questions.jsonl"
KEYS = ("reward/mean", "val/cem", "val/acc", "val/average_searches", "val/osr")


def config(output_dir: Path, steps: int, questions: int, *, plain: bool = False) -> dict[str, Any]:
    """The run's config; ``plain``: the same run without validation or trackers (the baseline)."""
    return {
        "output_dir": str(output_dir),
        "method": "hiprag",
        "model": {"path": "tiny-random", "torch_threads": 2},
        "data": {"path": str(QUESTIONS), "limit": 8},
        "rollout": {
            "factory": "agent",
            "options": {"index": str(INDEX), "judge": "evidence"},
            "max_turns": 2,
            "max_turn_tokens": 16,
            "max_obs_tokens": 32,
        },
        "training": {
            "max_steps": steps,
            "per_device_train_batch_size": 4,
            "num_generations": 2,
            "max_completion_length": 128,
            "learning_rate": 1e-3,
        },
        "logging": {"sample_every": 0},
        "validation": {"every_steps": 0 if plain else 1, "questions": questions},
        "trackers": [] if plain else ["trackio", "mlflow"],
    }


def train(root: Path, values: dict[str, Any]) -> float:
    """``python -m trainer.train`` on ``values``; its wall time in seconds (exits on a failed run)."""
    path = root / "config.json"
    path.write_text(json.dumps(values, indent=2))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "trainer.train", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        print(done.stderr[-4000:], file=sys.stderr)
        sys.exit(done.returncode)
    return time.perf_counter() - started


def read_back(output_dir: Path, run_name: str) -> dict[str, dict[tuple[int, str], float]]:
    from trainer import trackers

    found: dict[str, dict[tuple[int, str], float]] = {"metrics.jsonl": {}, "trackio": {}, "mlflow": {}}
    for line in (output_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        found["metrics.jsonl"][(row["step"], row["key"])] = row["value"]
    folder = trackers.tracker_folder(output_dir)
    trackers.use(folder, ["trackio", "mlflow"])
    from trackio.sqlite_storage import SQLiteStorage

    for row in SQLiteStorage.get_logs(trackers.PROJECT, run_name):
        for key in KEYS:
            name = f"train/searchlab/{key}"  # TRL's Trackio callback prefixes train/
            if name in row and "train/global_step" in row:
                found["trackio"][(int(row["train/global_step"]), key)] = row[name]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name(trackers.PROJECT)
    run = client.search_runs([experiment.experiment_id], filter_string=f"attributes.run_name = '{run_name}'")[
        0
    ]
    for key in KEYS:
        for metric in client.get_metric_history(run.info.run_id, f"searchlab/{key}"):
            found["mlflow"][(metric.step, key)] = metric.value
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--questions", type=int, default=4, help="held-out questions")
    parser.add_argument("--keep", help="write the run here instead of a temporary folder")
    parser.add_argument(
        "--baseline", action="store_true", help="first run the same config without validation or trackers"
    )
    args = parser.parse_args()
    if not INDEX.is_dir():
        print(f"no index at {INDEX}: run `make demo` once (it builds it)", file=sys.stderr)
        return 2
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="trackers-validation-"))
    output_dir = root / "1" / "output"  # a web-app run's layout: its tracker run is run-1
    output_dir.mkdir(parents=True, exist_ok=True)
    baseline = None
    if args.baseline:
        plain = root / "baseline" / "output"
        plain.mkdir(parents=True, exist_ok=True)
        baseline = train(plain.parent, config(plain, args.steps, args.questions, plain=True))
    seconds = train(root, config(output_dir, args.steps, args.questions))
    found = read_back(output_dir, "run-1")
    print(f"run folder: {output_dir}")
    print(f"{'step':>4}  {'key':<22} {'metrics.jsonl':>14} {'trackio':>10} {'mlflow':>10}")
    missing = 0
    for step in range(1, args.steps + 1):
        for key in KEYS:
            values = [found[source].get((step, key)) for source in ("metrics.jsonl", "trackio", "mlflow")]
            if values[0] is None:
                continue
            missing += sum(v != values[0] for v in values[1:])
            cells = " ".join(f"{'—' if v is None else f'{v:.4f}':>10}" for v in values[1:])
            print(f"{step:>4}  {key:<22} {values[0]:>14.4f} {cells}")
    print(f"values that differ from metrics.jsonl or are missing in a tracker: {missing}")
    print(
        f"wall time of python -m trainer.train ({args.steps} steps, validation every step): {seconds:.1f} s"
    )
    if baseline is not None:
        print(f"the same run without validation or trackers: {baseline:.1f} s")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
