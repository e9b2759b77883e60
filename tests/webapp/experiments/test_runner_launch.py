"""What the stage runner is given for a browser experiment: its inputs in the experiment's folder and a command
that carries every setting of the spec, read back by the runner's own parser; a setting it cannot run with is
refused naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trainer.config import get_path
from trainer.jobs.training import arm_config
from webapp.corpora.models import Index
from webapp.experiments import services
from webapp.experiments.models import Experiment
from webapp.experiments.runner_launch import runner_launch, runner_parse
from webapp.experiments.specs import KNOBS, ExperimentConfigError, ExperimentSpec, parse_arm
from webapp.experiments.stage_specs import training_config

pytestmark = pytest.mark.django_db


def test_the_runner_gets_every_setting_of_the_spec(make_spec: Any, index: Index) -> None:
    arms = (parse_arm("outcome=hiprag:lambda_p=0.0"), parse_arm("process=hiprag:lambda_p=0.4"))
    spec = make_spec(
        arms=arms,
        baseline="outcome",
        seeds=2,
        learning_rate=2e-5,
        lr_scheduler_type="cosine",
        max_turns=3,
        screen_samples=2,
        screen_unscreened_share=0.25,
        eval_batch_size=4,
    )
    experiment = services.experiment_create(user=None, spec=spec, enqueue=False)

    launch = runner_launch(experiment, spec, python="python")
    plan = runner_parse(launch.argv)

    assert launch.argv[:4] == ["python", "-m", "trainer.jobs", "experiment"]
    assert launch.out == launch.folder / "spool" and plan.out == launch.out
    assert [a.to_json() for a in plan.arms] == [a.to_json() for a in arms] and plan.baseline == "outcome"
    assert plan.seed_values == [0, 1] and plan.index is not None and str(plan.index) == index.path
    assert (plan.screen_samples, plan.screen_min, plan.screen_max) == (2, 1, 1)  # max -1: samples - 1
    assert plan.screen_unscreened_share == 0.25 and plan.eval_batch_size == 4
    assert plan.judge == spec.judge and plan.start_model is not None and str(plan.start_model) == spec.model
    split = json.loads((launch.folder / "runner" / "split.json").read_text())
    assert split == {"train": ["q0", "q1", "q2", "q3"], "held_out": ["q4", "q5", "q6", "q7"]}
    assert plan.eval_limit == 4 and plan.train_limit == 4 and plan.keep_guessable
    # Every knob of every arm's trainer config is the app's own.
    for arm in arms:
        runner = arm_config(plan, plan.arm(arm.name), 0, launch.work, launch.work, launch.work, launch.work)
        app = training_config(spec, arm, spec.model, index, seed=0)
        for path in KNOBS:
            assert get_path(runner.to_dict(), path) == get_path(app.to_dict(), path), path
        assert runner.reward.params == app.reward.params and runner.algorithm == app.algorithm


def test_a_question_both_trained_and_held_out_is_refused_naming_the_field(make_spec: Any) -> None:
    spec = make_spec()
    same = ExperimentSpec.from_json({**spec.to_json(), "eval_dataset_id": spec.train_dataset_id})
    experiment = services.experiment_create(user=None, spec=same, enqueue=False)

    with pytest.raises(ExperimentConfigError) as refused:
        runner_launch(experiment, same)
    assert refused.value.field == "eval_questions" and "e.g. 'q0'" in refused.value.message

    experiment = services.experiment_execute(experiment_id=experiment.pk)
    assert experiment.status == Experiment.Status.FAILED
    assert experiment.error.startswith("eval_questions: 4 questions are also training questions, e.g. 'q0'")


def test_an_index_without_its_folder_is_refused_naming_the_field(make_spec: Any, index: Index) -> None:
    spec = make_spec()
    experiment = services.experiment_create(user=None, spec=spec, enqueue=False)
    Index.objects.filter(pk=index.pk).update(path="/nowhere")

    experiment = services.experiment_execute(experiment_id=experiment.pk)

    assert experiment.status == Experiment.Status.FAILED and experiment.error.startswith("index: ")
