"""Where an experiment's training stages run (the spec's executor): local, or a Ray job each, chosen on the form and
by ``manage.py experiment --executor``; stored experiments without it run locally. The Ray cluster itself is in
test_ray.py (marked ``ray``); here a fake supervisor stands in for it."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.core.management import CommandError, call_command

from webapp.experiments import services
from webapp.experiments.forms import ExperimentForm
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.specs import ExperimentConfigError, ExperimentSpec
from webapp.runs.models import Run
from webapp.training import executors
from webapp.training.models import TrainingProcess

pytestmark = pytest.mark.django_db

CLUSTER = "http://127.0.0.1:8265"


def test_a_stored_spec_without_an_executor_trains_locally(make_spec: Any) -> None:
    stored = make_spec().to_json()
    assert stored.pop("executor") == executors.LOCAL
    assert ExperimentSpec.from_json(stored).executor == executors.LOCAL


def test_the_executor_is_checked(make_spec: Any, settings: Any) -> None:
    settings.RAY_ADDRESS = ""
    with pytest.raises(ExperimentConfigError, match="one of local, ray") as error:
        services.experiment_create(user=None, spec=make_spec(executor="k8s"), enqueue=False)
    assert error.value.field == "executor"
    with pytest.raises(ExperimentConfigError, match=r"no Ray cluster is configured \(set RAY_ADDRESS\)"):
        services.experiment_create(user=None, spec=make_spec(executor=executors.RAY), enqueue=False)
    assert Experiment.objects.count() == 0


def test_on_ray_the_stage_runner_is_a_ray_job_and_its_spool_is_replayed(
    make_spec: Any, fake_stages: dict[str, Any], settings: Any
) -> None:
    settings.RAY_ADDRESS = CLUSTER
    experiment = services.experiment_create(user=None, spec=make_spec(executor=executors.RAY), enqueue=False)

    experiment = services.experiment_execute(experiment_id=experiment.pk)

    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    [job] = fake_stages["ray"].submitted
    assert job["submission_id"].startswith(f"searchlab-experiment-{experiment.pk}-")
    assert " -m trainer.jobs experiment " in job["entrypoint"] and "--out" in job["entrypoint"]
    assert job["runtime_env"]["env_vars"]["PYTHONPATH"] == str(settings.BASE_DIR)
    assert f"Ray job {job['submission_id']} on {CLUSTER}" in experiment.log_tail
    by = {(link.role, link.arm): link.run for link in experiment.links.select_related("run")}
    for arm in ("search_r1", "hiprag"):
        assert by[("eval", arm)].model_name == by[("train", arm)].config["output_dir"]
    assert [row["label"] for row in experiment.result["rows"]][1] == "trained · search_r1"


def test_resuming_stops_the_ray_job_a_dead_worker_left(
    make_spec: Any, fake_stages: dict[str, Any], settings: Any
) -> None:
    from webapp.experiments.inputs import experiment_dir
    from webapp.experiments.runner_placement import RUNNER_FILE

    settings.RAY_ADDRESS = CLUSTER
    experiment = services.experiment_create(user=None, spec=make_spec(executor=executors.RAY), enqueue=False)
    folder = experiment_dir(experiment.pk)
    folder.mkdir(parents=True)
    left = f"searchlab-experiment-{experiment.pk}-abc"
    (folder / RUNNER_FILE).write_text(json.dumps({"executor": "ray", "job_id": left}))

    experiment = services.experiment_execute(experiment_id=experiment.pk)

    assert fake_stages["ray"].stopped == [left]
    assert experiment.status == Experiment.Status.FINISHED, experiment.error


def test_the_form_offers_ray_once_a_cluster_is_configured(settings: Any) -> None:
    settings.RAY_ADDRESS = ""
    assert [value for value, _ in ExperimentForm().fields["executor"].choices] == [executors.LOCAL]
    settings.RAY_ADDRESS = CLUSTER
    choices = dict(ExperimentForm().fields["executor"].choices)
    assert list(choices) == [executors.LOCAL, executors.RAY] and CLUSTER in choices[executors.RAY]
    assert ExperimentForm().fields["executor"].initial == executors.LOCAL


def test_the_browser_starts_an_experiment_on_ray(
    researcher_client: Any, make_spec: Any, index: Any, start_model: Any, settings: Any
) -> None:
    spec = make_spec()
    data = {
        "methods": ["search_r1"],
        "baseline": "search_r1",
        "model_path": str(start_model),
        "train_dataset": spec.train_dataset_id,
        "train_limit": 2,
        "eval_dataset": spec.eval_dataset_id,
        "eval_limit": 2,
        "index": index.pk,
        "judge": "evidence",
        "algorithm": "grpo",
        "num_generations": 2,
        "batch_size": 2,
        "eval_batch_size": 8,
        "resamples": 100,
        "executor": executors.RAY,
    }
    settings.RAY_ADDRESS = ""
    response = researcher_client.post("/experiments/", data)
    assert response.status_code == 400 and "executor" in response.context["form"].errors

    settings.RAY_ADDRESS = CLUSTER
    page = researcher_client.get("/experiments/").content.decode()
    assert f"ray (a job on {CLUSTER})" in page
    with mock.patch("webapp.experiments.tasks.experiment_run_task.delay"):
        response = researcher_client.post("/experiments/", data)
    assert response.status_code == 302, response.context["form"].errors
    experiment = Experiment.objects.get()
    assert experiment.spec["executor"] == executors.RAY
    response = researcher_client.post("/experiments/", {**data, "executor": ""})
    assert Experiment.objects.latest("pk").spec["executor"] == executors.LOCAL  # left empty: local

    train = Run.objects.create(
        name="t", kind=Run.Kind.TRAIN, method="search_r1", algorithm="grpo", status=Run.Status.RUNNING
    )
    TrainingProcess.objects.create(run=train, executor=executors.RAY, job_id=f"searchlab-run-{train.pk}-ab12")
    ExperimentRun.objects.create(
        experiment=experiment, role="train", method="search_r1", arm="search_r1", position=2, run=train
    )
    page = researcher_client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert 'training on <strong id="experiment-executor">ray</strong>' in page
    assert f"ray · Ray job <code>searchlab-run-{train.pk}-ab12</code>" in page


def test_the_command_takes_the_executor(
    question_file: Path, index: Any, start_model: Path, settings: Any
) -> None:
    from webapp.experiments.management.commands.experiment import Command

    assert "--executor {local,ray}" in Command().create_parser("manage.py", "experiment").format_help()
    settings.RAY_ADDRESS = ""
    options = (
        *("--model", str(start_model), "--train-questions", str(question_file)),
        *("--eval-questions", str(question_file), "--index-id", str(index.pk)),
    )
    with pytest.raises(CommandError, match=r"--executor: no Ray cluster is configured \(set RAY_ADDRESS\)"):
        call_command("experiment", *options, "--executor", "ray", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError, match="invalid choice: 'k8s'"):
        call_command("experiment", *options, "--executor", "k8s", stdout=StringIO(), stderr=StringIO())
    assert Experiment.objects.count() == 0
