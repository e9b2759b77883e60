"""An experiment on the local Ray cluster: ``manage.py experiment --executor ray`` with the tiny random model, whose
training stage is a Ray job reporting to a live searchlab over HTTP, and whose evaluations run in this process;
it ends with its table. The cluster and the live server are test_ray.py's of the training app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.webapp.experiments.test_real_experiment import run_tiny, shared_inputs  # noqa: F401  # a fixture
from tests.webapp.training.test_ray import live, ray_cluster  # noqa: F401  # fixtures
from webapp.runs.models import MetricPoint, Run
from webapp.training import executors
from webapp.training.models import TrainingProcess
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_an_experiment_trains_on_ray_and_evaluates_here(
    ray_cluster: str,  # noqa: F811
    live: Any,  # noqa: F811
    shared_inputs: tuple[Path, Path],  # noqa: F811
    settings: Any,
    tmp_path: Path,
) -> None:
    settings.RAY_ADDRESS = ray_cluster
    settings.TRAINING_INGEST_URL = live.url
    settings.RAY_POLL_SECONDS = 1.0

    experiment, out = run_tiny(
        shared_inputs,
        settings,
        tmp_path,
        *("--methods", "search_r1", "--num-generations", "2", "--batch-size", "2", "--executor", "ray"),
    )

    assert experiment.spec["executor"] == executors.RAY
    links = {link.role: link.run for link in experiment.links.select_related("run")}
    assert set(links) == {"start_eval", "train", "eval"}
    assert all(run.status == Run.Status.FINISHED for run in links.values())
    train = links["train"]
    process = TrainingProcess.objects.get(run=train)
    assert process.executor == executors.RAY and process.job_id.startswith(f"searchlab-run-{train.pk}-")
    from ray.job_submission import JobSubmissionClient

    assert JobSubmissionClient(ray_cluster).get_job_status(process.job_id).value == "SUCCEEDED"
    # The job reported its curve over HTTP; the model it saved is the one evaluated here.
    assert MetricPoint.objects.filter(run=train, step=1, key="reward/mean").exists()
    assert links["eval"].model_name == train.config["output_dir"]
    assert (Path(train.config["output_dir"]) / "config.json").is_file()
    assert not TrainingProcess.objects.filter(run__in=[links["start_eval"], links["eval"]]).exists()
    assert Trajectory.objects.filter(run=links["eval"]).count() == 2
    lines = out.getvalue().splitlines()
    table = {line.split("#")[0].strip() for line in lines[3:5]}
    assert table == {"start · search_r1", "trained · search_r1"}
    assert "search_r1: trained − start" in out.getvalue()
