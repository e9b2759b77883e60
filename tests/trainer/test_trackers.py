"""Trackers for real: a training run writes Trackio and MLflow runs under its folder, and they are read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.conftest import ConfigFactory
from trainer import trackers
from trainer.callbacks import METRICS_FILE
from trainer.train import build_trainer

pytest.importorskip("trackio")
pytest.importorskip("mlflow")


@pytest.fixture(autouse=True)
def _keep_environment() -> Any:
    """trackers.use sets the trackers' variables in os.environ: put them back after each test."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def trackio_logs(folder: Path, run_name: str) -> list[dict[str, Any]]:
    """The rows of a Trackio run under a trackers folder (its trackio/ database)."""
    trackers.use(folder, ["trackio"])  # Trackio reads its folder from a module global
    from trackio.sqlite_storage import SQLiteStorage

    logs: list[dict[str, Any]] = SQLiteStorage.get_logs(trackers.PROJECT, run_name)
    return logs


def mlflow_history(folder: Path, run_name: str, key: str) -> list[tuple[int, float]]:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(folder / "mlruns").resolve().as_uri())
    experiment = client.get_experiment_by_name(trackers.PROJECT)
    assert experiment is not None, "no MLflow experiment was written"
    runs = client.search_runs([experiment.experiment_id], filter_string=f"attributes.run_name = '{run_name}'")
    assert len(runs) == 1, f"expected one MLflow run named {run_name}, found {len(runs)}"
    return [(m.step, m.value) for m in client.get_metric_history(runs[0].info.run_id, key)]


@pytest.mark.slow  # a two-step run (about 5 s) and MLflow's import (about 4 s)
def test_a_training_run_writes_trackio_and_mlflow_runs_that_read_back(
    make_config: ConfigFactory, model: Any, tokenizer: Any, tmp_path: Path
) -> None:
    config = make_config(output_dir=str(tmp_path / "7" / "output"), trackers=["trackio", "mlflow"])
    trainer = build_trainer(config, model=model, tokenizer=tokenizer)
    assert trainer.args.report_to == ["trackio", "mlflow"]
    trainer.train()
    folder = trackers.tracker_folder(config.output_dir)
    written = [json.loads(line) for line in (Path(config.output_dir) / METRICS_FILE).read_text().splitlines()]
    reward = {row["step"]: row["value"] for row in written if row["key"] == "reward/mean"}
    assert set(reward) == {1, 2}

    # MLflow's file store under the run's folder: searchlab's reward curve, step for step, and TRL's loss
    assert mlflow_history(folder, "run-7", "searchlab/reward/mean") == sorted(reward.items())
    assert [step for step, _ in mlflow_history(folder, "run-7", "loss")] == [1, 2]

    # Trackio's database under the run's folder (TRL's callback prefixes its keys with train/)
    logs = trackio_logs(folder, "run-7")
    key = "train/searchlab/reward/mean"
    assert {int(row["train/global_step"]): row[key] for row in logs if key in row} == reward
    assert any("train/loss" in row for row in logs)  # TRL's own keys beside searchlab's
    assert (folder / "trackio" / f"{trackers.PROJECT}.db").is_file()


def test_nothing_is_pointed_at_a_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKIO_SPACE_ID", "someone/space")
    monkeypatch.setenv("WANDB_BASE_URL", "https://example.invalid")
    env = trackers.use(tmp_path, ["trackio", "mlflow"])
    assert "TRACKIO_SPACE_ID" not in os.environ and "WANDB_BASE_URL" not in os.environ
    assert env["TRACKIO_DIR"] == str((tmp_path / "trackio").resolve())
    assert env["MLFLOW_TRACKING_URI"] == (tmp_path / "mlruns").resolve().as_uri()
    wandb = trackers.environment(tmp_path, ["wandb"])
    assert wandb["WANDB_MODE"] == "offline" and wandb["WANDB_DIR"] == str(tmp_path.resolve())


def test_a_tracker_that_is_not_installed_is_a_config_error(
    make_config: ConfigFactory, model: Any, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainer.config import ConfigError

    monkeypatch.setattr(trackers, "missing", lambda names: ["wandb"])
    config = make_config(trackers=["wandb"])
    with pytest.raises(ConfigError) as error:
        build_trainer(config, model=model, tokenizer=tokenizer)
    assert error.value.field == "trackers" and "pip install wandb" in str(error.value)


@pytest.mark.slow  # two processes importing MLflow (about 4 s each)
def test_the_ingest_mirror_appends_each_batch_to_trackio_and_mlflow(tmp_path: Path) -> None:
    folder = tmp_path / "trackers"
    batches = [
        [
            {"step": 1, "key": "reward/mean", "value": 0.25, "time": 1.0e9},
            {"step": 1, "key": "val/cem", "value": 0.5, "time": 1.0e9},
        ],
        [{"step": 2, "key": "reward/mean", "value": 0.75, "time": 1.0e9 + 5}],
    ]
    for batch in batches:  # one short process per stored batch, as webapp.training.trackers runs it
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainer.trackers",
                "mirror",
                "--dir",
                str(folder),
                "--run-name",
                "run-9",
                "--tracker",
                "trackio",
                "--tracker",
                "mlflow",
            ],
            input=json.dumps(batch),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    assert mlflow_history(folder, "run-9", "reward/mean") == [(1, 0.25), (2, 0.75)]
    assert mlflow_history(folder, "run-9", "val/cem") == [(1, 0.5)]
    logs = trackio_logs(folder, "run-9")
    assert [(row["step"], row.get("reward/mean")) for row in logs] == [(1, 0.25), (2, 0.75)]
    assert logs[0]["val/cem"] == 0.5
