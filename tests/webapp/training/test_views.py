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
        ({"max_turn_tokens": 0}, "max_turn_tokens", "must be ≥ 1"),
        ({"max_rollout_tokens": 300}, "max_rollout_tokens", "must be ≤ training.max_completion_length (256)"),
        ({"algorithm": "ppo", "dynamic_sampling": "on"}, "dynamic_sampling", "PPO's advantages come from"),
    ],
)
def test_it_rejects_invalid_settings_with_a_field_error(form_data, changes, field, message):
    form = TrainingRunForm({**form_data, **changes})

    assert not form.is_valid()
    assert message in " ".join(form.errors[field]), form.errors


def test_the_budgets_reach_the_trainers_config(form_data):
    budgets = {
        "max_turns": 2,
        "max_turn_tokens": 48,
        "max_rollout_tokens": 200,
        "max_obs_tokens": 120,
        "topk": 2,
    }
    form = TrainingRunForm({**form_data, **budgets})
    assert form.is_valid(), form.errors

    rollout = form.run_config(output_dir="out").to_dict()["rollout"]
    assert {name: rollout[name] for name in budgets} == budgets


def test_dynamic_sampling_is_a_training_setting_of_the_form(form_data):
    off = TrainingRunForm(form_data)
    assert off.is_valid(), off.errors
    assert off.run_config(output_dir="out").training.dynamic_sampling is False  # opt-in
    on = TrainingRunForm(
        {
            **form_data,
            "dynamic_sampling": "on",
            "dynamic_sampling_max_draws": 4,
            "dynamic_sampling_spare_groups": 2,
        }
    )
    assert on.is_valid(), on.errors
    training = on.run_config(output_dir="out").training
    assert (training.dynamic_sampling, training.dynamic_sampling_max_draws) == (True, 4)
    assert training.dynamic_sampling_spare_groups == 2  # rolled out with the batch
    negative = TrainingRunForm({**form_data, "dynamic_sampling": "on", "dynamic_sampling_spare_groups": -1})
    assert "dynamic_sampling_spare_groups" in negative.errors


def test_the_form_trains_the_demos_top_layers_by_default_and_lora_asks_for_zero(form_data):
    from trainer.config import DEMO_TRAINABLE_LAYERS

    assert TrainingRunForm().fields["trainable_layers"].initial == DEMO_TRAINABLE_LAYERS == 10
    form = TrainingRunForm({**form_data, "trainable_layers": DEMO_TRAINABLE_LAYERS})
    assert form.is_valid(), form.errors
    assert form.run_config(output_dir="out").model.trainable_layers == 10
    form = TrainingRunForm({**form_data, "trainable_layers": DEMO_TRAINABLE_LAYERS, "lora": "on"})
    assert not form.is_valid()
    assert "must be 0 with model.lora" in form.errors["trainable_layers"][0]


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


def test_a_warm_start_run_is_created_from_its_form_and_supervised_with_the_warm_start_command(
    researcher_client, django_capture_on_commit_callbacks, settings, tmp_path
):
    from tests.webapp.factories import CorpusFactory, DatasetFactory, QuestionFactory
    from webapp.corpora.models import Index
    from webapp.training.supervisor import trainer_command

    settings.TRAINING_RUNS_DIR = tmp_path
    dataset = DatasetFactory(name="wiki")
    QuestionFactory(dataset=dataset, metadata={"split": "train", "supporting_titles": ["Paris"]})
    index = Index.objects.create(
        corpus=CorpusFactory(), name="bm25", kind="bm25", status=Index.Status.READY, path=str(tmp_path / "i")
    )
    post = {
        "name": "warm",
        "model_path": "tiny-random",
        "methods": ["hiprag", "search_r1"],
        "dataset": dataset.pk,
        "split": "train",
        "index": index.pk,
        "questions_per_method": 8,
        "no_search_share": 0.15,
        "epochs": 1,
        "learning_rate": "8e-5",
        "max_obs_tokens": 100,
        "max_turn_tokens": 48,
    }
    assert researcher_client.get("/training/warm-start/").status_code == 200
    with (
        mock.patch("webapp.training.tasks.training_supervise_task.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = researcher_client.post("/training/warm-start/", post)

    run = Run.objects.get()
    assert response.status_code == 302 and response.url == f"/runs/{run.pk}/"
    assert (run.kind, run.algorithm, run.method, run.index) == ("warm_start", "sft", "hiprag", index)
    assert run.config["methods"] == ["hiprag", "search_r1"] and run.config["index"] == index.path
    assert run.config["data"]["questions_per_method"] == 8
    assert run.config["max_turn_tokens"] == 48  # the demonstrations keep to the run's turn budget
    delay.assert_called_once_with(run.pk)
    assert trainer_command(tmp_path / "c.json", kind=run.kind)[1:3] == ["-m", "trainer.warm_start"]


def test_a_finished_warm_starts_output_is_offered_as_a_policy(settings, tmp_path):
    from webapp.training.config import available_models

    settings.VAR_DIR = tmp_path
    output = tmp_path / "runs" / "7" / "output"
    output.mkdir(parents=True)
    (output / "config.json").write_text("{}")
    run = RunFactory(
        kind="warm_start", algorithm="sft", status="finished", config={"output_dir": str(output)}
    )

    assert (str(output), f"warm start #{run.pk} {run.name}") in available_models()
    assert str(output) in TrainingRunForm().known_models[0]
