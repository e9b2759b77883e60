"""A researcher starts an experiment on the local Ray cluster from the browser: the form's placement is ``ray``, the
worker's task launches the stage runner as one Ray job and replays its spool (the tiny random model, one step), and
the experiment page shows the table, the stages and the runner's log. Real parts: the live Django server, Debian's
Chromium driven by Playwright, a Ray head (test_ray.py's of the training app). The page's screenshot goes to
EXPERIMENT_RAY_SCREENSHOT (docs/img/experiment-on-ray.png is one)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.webapp.experiments.test_browser_seeds import CHROMIUM, CHROMIUM_ARGS
from tests.webapp.experiments.test_real_experiment import shared_inputs  # noqa: F401  # a fixture
from tests.webapp.training.test_ray import ray_cluster  # noqa: F401  # a fixture
from webapp.accounts.models import Role
from webapp.accounts.services import user_create
from webapp.experiments import inputs, services
from webapp.experiments.models import Experiment

SCREENSHOT = Path(os.environ.get("EXPERIMENT_RAY_SCREENSHOT", "/tmp/searchlab-experiment-on-ray.png"))

pytestmark = [
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium: tests/browser_setup.sh"),
]


def test_the_browser_starts_an_experiment_whose_runner_is_a_ray_job(
    live_server: Any,
    ray_cluster: str,  # noqa: F811
    shared_inputs: tuple[Path, Path],  # noqa: F811
    settings: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from playwright.sync_api import sync_playwright

    # the worker's task runs here, inside Playwright's sync API (an event loop in this thread)
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    settings.RAY_ADDRESS = ray_cluster
    settings.EXPERIMENTS_DIR = tmp_path / "experiments"
    settings.EXPERIMENT_POLL_SECONDS = 1.0
    questions, folder = shared_inputs
    rows = inputs.read_question_file(questions)
    train = inputs.experiment_dataset(rows=inputs.select_rows(rows, split="train"), label="train")
    held_out = inputs.experiment_dataset(rows=inputs.select_rows(rows, split="test"), label="eval")
    index = inputs.index_for_folder(folder)
    user_create(username="rey", password="pw-rey-123456", role=Role.RESEARCHER)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "rey")
        page.fill("input[name=password]", "pw-rey-123456")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.goto(f"{live_server.url}/experiments/")
        page.fill("input[name=name]", "search_r1 on Ray, tiny model, 1 step")
        page.uncheck("input[name=methods][value=hiprag]")
        page.fill("input[name=model_path]", "tiny-random")
        page.select_option("select[name=train_dataset]", str(train.pk))
        page.select_option("select[name=eval_dataset]", str(held_out.pk))  # their splits: train and test
        page.select_option("select[name=index]", str(index.pk))
        page.fill("input[name=train_limit]", "2")
        page.fill("input[name=eval_limit]", "2")
        knobs = {"steps": "1", "num_generations": "2", "batch_size": "2", "max_turns": "1"}
        knobs |= {"max_completion_length": "96", "max_turn_tokens": "12", "max_rollout_tokens": "64"}
        for name, value in {
            **knobs,
            "max_obs_tokens": "16",
            "eval_batch_size": "2",
            "resamples": "50",
        }.items():
            page.fill(f"input[name={name}]", value)
        page.select_option("select[name=executor]", "ray")
        with mock.patch("webapp.experiments.tasks.experiment_run_task.delay") as queued:
            page.click("form.run-form button[type=submit]")
            page.wait_for_load_state()
        experiment = Experiment.objects.get()
        queued.assert_called_once_with(experiment.pk)
        # the worker's task: the runner as a Ray job, its spool replayed as it grows
        experiment = services.experiment_execute(experiment_id=experiment.pk)
        assert experiment.status == Experiment.Status.FINISHED, experiment.error
        page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
        text = page.content()
        assert 'id="experiment-executor">ray' in text and "Ray job searchlab-experiment-" in text
        assert "ray · the stage runner, Ray job searchlab-experiment-" in text  # each stage's place
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)
        browser.close()
    assert SCREENSHOT.stat().st_size > 10_000
