"""Runs reported over HTTP mirrored to their experiment trackers (Trackio, MLflow, W&B offline) from the ingest path.

A run whose trainer runs elsewhere (executor ``external``: ``POST /api/v1/runs/external/`` with
``config: {"trackers": ["trackio", "mlflow"]}``) has its metric rows, once stored, appended to each tracker under
``<TRAINING_RUNS_DIR>/<run id>/trackers/`` by ``python -m trainer.trackers mirror`` after the batch commits: a short
process per batch, so the web process holds no tracker's global state, and a tracker that fails is logged, never an
ingest error. A run the train worker starts itself (``python -m trainer.train``) reports to its trackers through
TRL's ``report_to`` and is not mirrored again here.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction

from trainer.config import TRACKERS
from trainer.placement import CONFIG_KEY, Placement
from trainer.trackers import FOLDER

logger = logging.getLogger(__name__)

MIRROR_TIMEOUT_S = 300


def run_trackers(config: Mapping[str, Any] | None) -> list[str]:
    """The trackers a run reported over HTTP mirrors to (none for a run whose own trainer reports to them)."""
    config = config or {}
    if config.get(CONFIG_KEY) != Placement.EXTERNAL:
        return []
    wanted = config.get("trackers")
    return [name for name in TRACKERS if isinstance(wanted, list) and name in wanted]


def mirror_metrics(run: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """After the current transaction commits, append ``rows`` ({"step", "key", "value", "time"}) to the run's
    trackers (no-op when it has none)."""
    trackers = run_trackers(run.config)
    if not trackers or not rows:
        return
    folder = settings.TRAINING_RUNS_DIR / str(run.pk) / FOLDER
    payload = json.dumps([dict(row) for row in rows])
    command = [
        sys.executable,
        "-m",
        "trainer.trackers",
        "mirror",
        "--dir",
        str(folder),
        "--run-name",
        f"run-{run.pk}",
    ]
    for name in trackers:
        command += ["--tracker", name]
    transaction.on_commit(lambda: _run(command, payload, run.pk))


def _run(command: list[str], payload: str, run_id: int) -> None:
    try:
        done = subprocess.run(
            command,
            input=payload,
            capture_output=True,
            text=True,
            timeout=MIRROR_TIMEOUT_S,
            cwd=settings.BASE_DIR,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.warning("run %s: mirroring metrics to its trackers failed: %s", run_id, exc)
        return
    if done.returncode:
        logger.warning(
            "run %s: mirroring metrics to its trackers failed (exit %s): %s",
            run_id,
            done.returncode,
            done.stderr.strip()[-2000:],
        )
