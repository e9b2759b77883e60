"""The new-run form (validation errors come from the trainer's and scoring's own rules) and the run page."""

from __future__ import annotations

from unittest import mock

import pytest

from tests.webapp.factories import MetricPointFactory, RunFactory
from webapp.runs.models import Run
from webapp.training.forms import TrainingRunForm
from webapp.training.models import TrainingProcess

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"learning_rate": "-1"}, "learning_rate", "must be > 0"),  # trainer.config's range check
        ({"num_generations": 3}, "per_device_train_batch_size", "multiple of training.num_generations"),
        ({"num_generations": 1, "per_device_train_batch_size": 1}, "num_generations", "≥ 2"),
        ({"lambda_f": "5"}, "lambda_f", "must lie in [0.0, 1.0]"),  # scoring's HiPRAG weights
        ({"reward_params": '{"process": "sometimes"}'}, "reward_params", "must be one of both"),
        ({"reward_params": '{"lambda_x": 1}'}, "reward_params", "unknown"),
        ({"gamma": "1.5"}, "gamma", "must lie in [0, 1]"),
        ({"model_path": "/nowhere/model"}, "model_path", "not a transformers model folder"),
        ({"rollout": "agent"}, "index", "pick one, or use the scripted rollout"),
        ({"judge": "policy"}, "judge", "Only the agent rollout calls a judge"),
        ({"max_steps": "many"}, "max_steps", "Enter a whole number"),
    ],
)
def test_it_rejects_invalid_settings_with_a_field_error(form_data, changes, field, message):
    form = TrainingRunForm({**form_data, **changes})

    assert not form.is_valid()
    assert message in " ".join(form.errors[field]), form.errors


def test_it_wants_an_endpoint_judge_named_and_its_key_by_variable_name(form_data):
    form = TrainingRunForm({**form_data, "judge": "endpoint", "judge_api_key_env": "sk-live-123"})

    assert not form.is_valid()
    assert "Required for an endpoint judge." in form.errors["judge_base_url"]
    assert "NAME of an environment variable" in form.errors["judge_api_key_env"][0]


def test_it_shows_the_new_run_form(researcher_client):
    response = researcher_client.get("/training/new/")

    assert response.status_code == 200
    assert "training/new_run.html" in [t.name for t in response.templates]
    assert b'name="max_steps"' in response.content


def test_it_shows_errors_on_the_form(researcher_client, form_data):
    response = researcher_client.post("/training/new/", {**form_data, "learning_rate": "0"})

    assert response.status_code == 400
    assert "must be &gt; 0, got 0.0" in response.content.decode()


def test_it_creates_a_pending_run_and_enqueues_its_supervisor(
    researcher, researcher_client, form_data, django_capture_on_commit_callbacks, settings, tmp_path
):
    settings.TRAINING_RUNS_DIR = tmp_path
    with (
        mock.patch("webapp.training.tasks.training_supervise_task.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = researcher_client.post("/training/new/", form_data)

    run = Run.objects.get()
    assert response.status_code == 302 and response.url == f"/runs/{run.pk}/"
    assert (run.kind, run.status, run.algorithm, run.created_by) == ("train", "pending", "grpo", researcher)
    assert run.config["output_dir"] == str(tmp_path / str(run.pk) / "output")
    assert run.config["training"]["max_steps"] == 3
    assert run.config["reward"]["params"] == {"lambda_f": 0.2, "lambda_p": 0.4}
    assert TrainingProcess.objects.get(run=run).run_dir == str(tmp_path / str(run.pk))
    delay.assert_called_once_with(run.pk)


def test_it_shows_the_run_page_with_its_curves(researcher_client):
    run = RunFactory(kind=Run.Kind.TRAIN, algorithm="grpo", status=Run.Status.RUNNING, log_tail="step 1 done")
    other = RunFactory(name="baseline-run")
    MetricPointFactory(run=other, key="reward/mean")

    response = researcher_client.get(f"/runs/{run.pk}/")

    assert response.status_code == 200
    assert "runs/run_detail.html" in [t.name for t in response.templates]
    html = response.content.decode()
    assert f'data-metrics-url="/api/v1/runs/{run.pk}/metrics/"' in html
    assert 'data-active="true"' in html
    assert "baseline-run</option>" in html  # a run to overlay
    assert "vendor/uplot/uPlot.iife.min.js" in html and "step 1 done" in html


def test_it_requests_a_stop_of_a_running_train_run(researcher_client):
    run = RunFactory(kind=Run.Kind.TRAIN, algorithm="grpo", status=Run.Status.RUNNING)
    TrainingProcess.objects.create(run=run, run_dir="/tmp/none")

    response = researcher_client.post(f"/runs/{run.pk}/cancel/", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert "stopping…" in response.content.decode()
    assert TrainingProcess.objects.get(run=run).stop_requested_at is not None
