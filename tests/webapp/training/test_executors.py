"""What a Ray job is given (no cluster needed): its config on the node, the retriever by URL, the entrypoint with
accelerate over the node's GPUs, the runtime environment, and how a finished job's state becomes the run's."""

from __future__ import annotations

import json
import shlex

import pytest

from webapp.runs.models import Run
from webapp.runs.services import run_create
from webapp.training import executors
from webapp.training.forms import TrainingRunForm

pytestmark = pytest.mark.django_db


@pytest.fixture
def run() -> Run:
    run = run_create(
        name="big", method="hiprag", model_name="Qwen2.5-3B", kind=Run.Kind.TRAIN, algorithm="grpo"
    )
    run.config = {
        "output_dir": "/web/var/runs/1/output",
        "data": {"path": "/web/var/runs/1/questions.jsonl"},
        "rollout": {"factory": "agent", "options": {"index": "/web/var/indexes/wiki", "judge": "evidence"}},
    }
    run.save()
    return run


def test_the_job_runs_in_its_nodes_folder_and_searches_its_nodes_retriever(run, settings):
    settings.RAY_RUNS_DIR = "/scratch/searchlab"
    settings.RAY_RETRIEVE_URL = "http://127.0.0.1:8001/retrieve"
    config = executors.job_config(run)
    assert config["output_dir"] == f"/scratch/searchlab/{run.pk}/output"
    assert config["data"]["path"] == f"/scratch/searchlab/{run.pk}/questions.jsonl"
    assert config["rollout"]["options"] == {
        "retrieve_url": "http://127.0.0.1:8001/retrieve",
        "judge": "evidence",
    }
    assert (
        run.config["rollout"]["options"]["index"] == "/web/var/indexes/wiki"
    )  # the run's own config is untouched


def test_the_entrypoint_wraps_accelerate_in_the_report_client(run, settings):
    settings.RAY_ACCELERATE_ARGS = [
        "--config_file",
        "docker/accelerate/multi_gpu.yaml",
        "--num_processes",
        "8",
    ]
    settings.RAY_PYTHON = "/opt/venv/bin/python"
    command = shlex.split(executors.job_entrypoint(run, url="http://web:8000").split(" && ", 1)[1])
    separator = command.index("--")
    assert command[:3] == ["/opt/venv/bin/python", "-m", "trainer.report_client"]
    assert command[command.index("--url") + 1] == "http://web:8000" and "--files-from-env" in command
    assert command[separator + 1 : separator + 4] == [
        "/opt/venv/bin/python",
        "-m",
        "accelerate.commands.launch",
    ]
    assert command[-3:] == ["-m", "trainer.train", f"{settings.TRAINING_RUNS_DIR}/{run.pk}/config.json"]
    assert "--num_processes" in command


def test_the_runtime_env_carries_config_token_and_a_cooperative_stop(run, settings):
    settings.RAY_RUNTIME_ENV = {"env_vars": {"HF_HOME": "/models"}, "working_dir": "/srv/searchlab"}
    env = executors.runtime_env(run, token="t0k", questions='{"id": "q1"}\n')
    variables = env["env_vars"]
    assert json.loads(variables["SEARCHLAB_RUN_CONFIG"])["output_dir"].endswith(f"/{run.pk}/output")
    assert variables["SEARCHLAB_RUN_TOKEN"] == "t0k" and variables["SEARCHLAB_RUN_QUESTIONS"].startswith(
        '{"id"'
    )
    assert variables["RAY_JOB_STOP_SIGNAL"] == "SIGINT" and variables["HF_HOME"] == "/models"
    assert env["working_dir"] == "/srv/searchlab"


@pytest.mark.parametrize(
    ("status", "stop", "code", "expected"),
    [
        ("SUCCEEDED", False, 0, Run.Status.FINISHED),
        ("STOPPED", True, None, Run.Status.CANCELLED),
        ("FAILED", True, 130, Run.Status.CANCELLED),
        ("STOPPED", False, None, Run.Status.CRASHED),  # `ray job stop` by someone else
        ("FAILED", False, 137, Run.Status.CRASHED),  # SIGKILL (OOM killer, an operator)
        ("FAILED", False, None, Run.Status.CRASHED),  # the node or the job supervisor died
        ("FAILED", False, 1, Run.Status.FAILED),  # the trainer's own error
    ],
)
def test_a_jobs_end_becomes_the_runs_status(status, stop, code, expected):
    assert executors.outcome(status, stop_requested=stop, exit_code=code, message="")[0] == expected


def test_the_form_offers_ray_only_with_a_cluster(settings, form_data):
    settings.RAY_ADDRESS = ""
    assert "executor" not in TrainingRunForm().fields
    settings.RAY_ADDRESS = "http://ray-head:8265"
    form = TrainingRunForm(data={**form_data, "executor": "ray"})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["executor"] == "ray"
    assert ("Where it runs", ("executor",)) in form.fieldsets
    form.grouped_fields()  # every field in exactly one group


def test_the_run_page_names_the_executor_and_the_ray_job(run, researcher_client):
    from webapp.training.models import TrainingProcess

    TrainingProcess.objects.create(
        run=run, run_dir="/web/var/runs/1", executor="ray", job_id="searchlab-run-1-ab12"
    )
    page = researcher_client.get(f"/runs/{run.pk}/").content.decode()
    assert "<dt>executor</dt><dd>ray · Ray job <code>searchlab-run-1-ab12</code></dd>" in page
