"""Validation and trackers on the new-run form, and a run reported over HTTP mirrored to its trackers on ingest."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.webapp.factories import RunFactory
from webapp.runs.models import Run
from webapp.training.forms import TrainingRunForm
from webapp.training.ingest import store_batch
from webapp.training.trackers import run_trackers

pytestmark = pytest.mark.django_db


def test_the_form_starts_without_validation_or_trackers(form_data: dict[str, Any]) -> None:
    form = TrainingRunForm(form_data)
    assert form.is_valid(), form.errors
    config = form.run_config(output_dir="out")
    assert (config.validation.every_steps, config.trackers) == (0, [])
    assert "Validation and trackers" in [legend for legend, _ in form.fieldsets]


def test_validation_and_trackers_reach_the_trainers_config(
    form_data: dict[str, Any], monkeypatch: Any
) -> None:
    form = TrainingRunForm(
        {**form_data, "every_steps": 5, "questions": 8, "trackers": ["trackio", "mlflow"]},
    )
    form.is_valid()
    # the scripted rollout has no search engine: the trainer's own rule lands on the field
    assert "rollout.factory = 'agent'" in " ".join(form.errors["every_steps"])
    form = TrainingRunForm({**form_data, "every_steps": 0, "trackers": ["trackio", "mlflow"]})
    assert form.is_valid(), form.errors
    assert form.run_config(output_dir="out").trackers == ["trackio", "mlflow"]
    assert "tensorboard" not in dict(form.fields["trackers"].choices)  # type: ignore[attr-defined]


def test_only_a_run_reported_over_http_is_mirrored_from_the_ingest_path() -> None:
    assert run_trackers({"executor": "external", "trackers": ["mlflow", "trackio", "nope"]}) == [
        "trackio",
        "mlflow",
    ]
    assert run_trackers({"trackers": ["trackio"]}) == []  # the train worker's own run: TRL's report_to writes
    assert run_trackers({"executor": "external"}) == []  # off by default


@pytest.fixture
def restored_environment() -> Any:
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.slow  # a Python process importing Trackio per stored batch (about 2 s each)
def test_an_external_runs_stored_metrics_reach_its_trackio_run(
    settings: Any,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
    restored_environment: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("trackio")
    settings.TRAINING_RUNS_DIR = tmp_path / "runs"
    run = RunFactory(
        kind=Run.Kind.TRAIN,
        algorithm="grpo",
        status=Run.Status.RUNNING,
        config={"executor": "external", "trackers": ["trackio"]},
    )
    local = RunFactory(
        kind=Run.Kind.TRAIN, algorithm="grpo", status=Run.Status.RUNNING, config={"trackers": ["trackio"]}
    )
    now = time.time()
    for step, value in ((1, 0.2), (2, 0.6)):
        rows = [{"step": step, "key": "reward/mean", "value": value, "time": now + step}]
        for target in (run, local):
            with django_capture_on_commit_callbacks(execute=True):
                store_batch(run_id=target.pk, batch={"metrics": rows})

    from trainer import trackers

    folder = tmp_path / "runs" / str(run.pk) / "trackers"
    trackers.use(folder, ["trackio"])
    from trackio.sqlite_storage import SQLiteStorage

    logs = SQLiteStorage.get_logs(trackers.PROJECT, f"run-{run.pk}")
    assert [(row["step"], row["reward/mean"]) for row in logs] == [(1, 0.2), (2, 0.6)], caplog.text
    assert not (tmp_path / "runs" / str(local.pk)).exists()
