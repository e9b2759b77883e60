"""Experiment trackers a run mirrors its metrics to: Trackio, MLflow and W&B, each on disk under the run's folder.

Off by default; a run asks for them with ``trackers = ["trackio", "mlflow"]`` (:class:`trainer.config.RunConfig`).
Nothing goes to a network: :func:`use` points every tracker at ``<folder>/`` and removes the variables that would send
it elsewhere.

=========  =====================================================  ===================================================
tracker    where it writes                                        read it with
=========  =====================================================  ===================================================
trackio    ``<folder>/trackio/searchlab.db`` (``TRACKIO_DIR``)     ``TRACKIO_DIR=<folder>/trackio trackio show``
mlflow     ``<folder>/mlruns`` (``MLFLOW_TRACKING_URI=file:…``)    ``mlflow ui --backend-store-uri <folder>/mlruns``
wandb      ``<folder>/wandb/offline-run-*`` (``WANDB_MODE``)       ``wandb sync <folder>/wandb/offline-run-*``
=========  =====================================================  ===================================================

Two paths use them:

* a TRL run (``python -m trainer.train``) passes the names to TRL's ``report_to``; the trainer's callbacks
  (:class:`trainer.callbacks.MetricsCallback`) add searchlab's metrics (``reward/mean``, ``val/cem`` …) to what TRL
  logs, so the trackers hold the run page's curves. Trackio prefixes TRL's keys with ``train/``.
* a run reported over HTTP (``POST /api/v1/runs/<id>/ingest/``, executor ``external``) is mirrored from the ingest
  path by ``python -m trainer.trackers mirror`` (:func:`mirror`), a short process per stored batch, so the web
  process never holds a tracker's global state.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer.config import TRACKERS

PROJECT = "searchlab"
FOLDER = "trackers"  # under a run's output_dir (TRL runs) or run folder (runs reported over HTTP)
MODULES = {"trackio": "trackio", "mlflow": "mlflow", "wandb": "wandb"}
# Variables that would send a tracker's data to a server, a Space or a bucket: never inherited by a run.
REMOTE_VARIABLES = (
    "TRACKIO_SPACE_ID",
    "TRACKIO_SERVER_URL",
    "TRACKIO_BUCKET_ID",
    "TRACKIO_DATASET_ID",
    "MLFLOW_RUN_ID",
    "WANDB_BASE_URL",
    "WANDB_API_KEY",
)


class TrackerError(RuntimeError):
    """A tracker asked for is not installed, or failed to write."""


def tracker_folder(output_dir: str | Path) -> Path:
    return Path(output_dir) / FOLDER


def missing(trackers: Iterable[str]) -> list[str]:
    """The trackers whose Python package is not installed here."""
    return [name for name in trackers if importlib.util.find_spec(MODULES[name]) is None]


def environment(folder: Path, trackers: Iterable[str]) -> dict[str, str]:
    """The variables that keep each tracker on disk under ``folder`` (absolute paths)."""
    folder = folder.resolve()
    env: dict[str, str] = {}
    names = set(trackers)
    if "trackio" in names:
        env["TRACKIO_DIR"] = str(folder / "trackio")
    if "mlflow" in names:
        env["MLFLOW_TRACKING_URI"] = (folder / "mlruns").as_uri()
        env["MLFLOW_EXPERIMENT_NAME"] = PROJECT
        # MLflow 3 refuses its file store unless asked (it prefers a database server); the file store is the
        # one that needs nothing running.
        env["MLFLOW_ALLOW_FILE_STORE"] = "true"
    if "wandb" in names:
        env["WANDB_MODE"] = "offline"
        env["WANDB_DIR"] = str(folder)
        env["WANDB_PROJECT"] = PROJECT
        env["WANDB_SILENT"] = "true"
    return env


def use(folder: Path, trackers: Sequence[str]) -> dict[str, str]:
    """Point this process's trackers at ``folder`` (os.environ, and Trackio's module globals when it is already
    imported: it reads ``TRACKIO_DIR`` once, at import); returns the variables set. Raises :class:`TrackerError`
    naming a tracker that is not installed."""
    absent = missing(trackers)
    if absent:
        raise TrackerError(
            f"{', '.join(absent)} not installed in this environment: pip install {' '.join(absent)} "
            "(or leave it out of trackers)"
        )
    env = environment(folder, trackers)
    for name in REMOTE_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(env)
    folder.mkdir(parents=True, exist_ok=True)
    if "trackio" in trackers and "trackio" in sys.modules:
        directory = Path(env["TRACKIO_DIR"])
        for module in ("trackio", "trackio.utils", "trackio.sqlite_storage"):
            loaded = sys.modules.get(module)
            if loaded is not None and hasattr(loaded, "TRACKIO_DIR"):
                setattr(loaded, "TRACKIO_DIR", directory)  # noqa: B010 (a module global)
    return env


def trl_arguments(args: Any, trackers: Sequence[str], *, run_name: str) -> Any:
    """TRL's ``report_to`` and the trackers' names on a GRPOConfig (local only: no Trackio Space, no freeze)."""
    args.report_to = list(trackers)
    args.run_name = run_name
    if hasattr(args, "project"):
        args.project = PROJECT
    if hasattr(args, "trackio_space_id"):
        args.trackio_space_id = None
    if hasattr(args, "trackio_static_space_id"):
        args.trackio_static_space_id = False
    return args


# --- the ingest path: metric rows mirrored by a short process --------------------------------------------------


def by_step(rows: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, float]]:
    """``{step: {key: value}}`` of metric rows ``{"step", "key", "value"}`` (a later row of a key wins)."""
    steps: dict[int, dict[str, float]] = defaultdict(dict)
    for row in rows:
        steps[int(row["step"])][str(row["key"])] = float(row["value"])
    return dict(sorted(steps.items()))


def mirror(
    folder: Path, trackers: Sequence[str], rows: Sequence[Mapping[str, Any]], *, run_name: str
) -> None:
    """Write metric rows ``{"step", "key", "value", "time"}`` to each tracker under ``folder``, appending to the run
    called ``run_name`` (created on its first batch). Call it in a process of its own (``python -m trainer.trackers
    mirror``): it sets the trackers' environment variables."""
    use(folder, trackers)
    steps = by_step(rows)
    if not steps:
        return
    for name in trackers:
        {"trackio": _mirror_trackio, "mlflow": _mirror_mlflow, "wandb": _mirror_wandb}[name](
            steps, rows, run_name
        )


def _mirror_trackio(
    steps: dict[int, dict[str, float]], rows: Sequence[Mapping[str, Any]], run_name: str
) -> None:
    trackio: Any = importlib.import_module("trackio")
    trackio.init(
        project=PROJECT, name=run_name, resume="allow", auto_log_cpu=False, auto_log_gpu=False, embed=False
    )
    for step, metrics in steps.items():
        trackio.log(metrics, step=step)
    trackio.finish()


def _mirror_mlflow(
    steps: dict[int, dict[str, float]], rows: Sequence[Mapping[str, Any]], run_name: str
) -> None:
    tracking: Any = importlib.import_module("mlflow.tracking")
    entities: Any = importlib.import_module("mlflow.entities")
    client = tracking.MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name(PROJECT)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(PROJECT)
    found = client.search_runs([experiment_id], filter_string=f"tags.`searchlab.run` = '{run_name}'")
    if found:
        run_id = found[0].info.run_id
    else:
        run_id = client.create_run(
            experiment_id, run_name=run_name, tags={"searchlab.run": run_name}
        ).info.run_id
    metrics = [
        entities.Metric(
            str(row["key"]),
            float(row["value"]),
            int(float(row.get("time") or time.time()) * 1000),
            int(row["step"]),
        )
        for row in rows
    ]
    for start in range(0, len(metrics), 1000):  # MLflow's log_batch takes at most 1,000 metrics
        client.log_batch(run_id, metrics=metrics[start : start + 1000])


def _mirror_wandb(
    steps: dict[int, dict[str, float]], rows: Sequence[Mapping[str, Any]], run_name: str
) -> None:
    wandb: Any = importlib.import_module("wandb")
    run = wandb.init(
        project=PROJECT,
        name=run_name,
        id="".join(c if c.isalnum() else "-" for c in run_name)[:64],
        resume="allow",
        mode="offline",
        dir=os.environ["WANDB_DIR"],
    )
    for step, metrics in steps.items():
        run.log(metrics, step=step)
    run.finish()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.trackers",
        description="Mirror metric rows (JSON list on stdin) to local experiment trackers.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("mirror", help="append metric rows to a run's trackers")
    cmd.add_argument("--dir", required=True, help="the trackers' folder (the run's <folder>/trackers)")
    cmd.add_argument("--tracker", action="append", choices=TRACKERS, required=True)
    cmd.add_argument("--run-name", required=True)
    args = parser.parse_args(argv)
    rows = json.load(sys.stdin)
    if not isinstance(rows, list):
        print("stdin must hold a JSON list of metric rows", file=sys.stderr)
        return 2
    try:
        mirror(Path(args.dir), args.tracker, rows, run_name=args.run_name)
    except TrackerError as exc:
        print(f"trackers: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
