"""An experiment on the local Ray cluster: ``manage.py experiment --executor ray`` with the tiny random model, whose
stage runner (``python -m trainer.jobs experiment``) is one Ray job: its trainers and evaluations run on the node, its
spool is replayed here as it grows; it ends with its table. The cluster is test_ray.py's of the training app."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.webapp.experiments.test_real_experiment import run_tiny, shared_inputs  # noqa: F401  # a fixture
from tests.webapp.training.test_ray import ray_cluster  # noqa: F401  # a fixture
from webapp.experiments.runner_placement import RUNNER_FILE
from webapp.runs.models import MetricPoint, Run
from webapp.training import executors
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_an_experiments_runner_is_a_ray_job_and_its_spool_is_replayed_here(
    ray_cluster: str,  # noqa: F811
    shared_inputs: tuple[Path, Path],  # noqa: F811
    settings: Any,
    tmp_path: Path,
) -> None:
    settings.RAY_ADDRESS = ray_cluster
    settings.EXPERIMENT_POLL_SECONDS = 1.0

    experiment, out = run_tiny(
        shared_inputs,
        settings,
        tmp_path,
        *("--methods", "search_r1", "--num-generations", "2", "--batch-size", "2", "--executor", "ray"),
    )

    assert experiment.spec["executor"] == executors.RAY
    runner = json.loads((Path(settings.EXPERIMENTS_DIR) / str(experiment.pk) / RUNNER_FILE).read_text())
    assert runner["executor"] == executors.RAY
    assert runner["job_id"].startswith(f"searchlab-experiment-{experiment.pk}-")
    assert f"Ray job {runner['job_id']}" in experiment.log_tail
    from ray.job_submission import JobSubmissionClient

    assert JobSubmissionClient(ray_cluster).get_job_status(runner["job_id"]).value == "SUCCEEDED"
    links = {link.role: link.run for link in experiment.links.select_related("run")}
    assert set(links) == {"start_eval", "train", "eval"}
    assert all(run.status == Run.Status.FINISHED for run in links.values())
    train = links["train"]
    # The trainer's curve came through its run spool; the model it saved is the one evaluated on the node.
    assert MetricPoint.objects.filter(run=train, step=1, key="reward/mean").exists()
    assert links["eval"].model_name == train.config["output_dir"]
    assert Trajectory.objects.filter(run=links["eval"]).count() == 2
    lines = out.getvalue().splitlines()
    table = {line.split("#")[0].strip() for line in lines[3:5]}
    assert table == {"start · search_r1", "trained · search_r1"}
    assert "search_r1: trained − start" in out.getvalue()
