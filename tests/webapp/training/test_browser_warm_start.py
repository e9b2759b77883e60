"""A researcher starts a HiPRAG run of the warm-started SmolLM2 from the demo's new-run form and sees it learn.

The product's main job, end to end: the demo's defaults (the agent rollout on the demo index, the warm-started
policy, the evidence judge (heuristic, no LLM), the demo's budgets), a real Celery worker and supervisor, ``python -m trainer.train``
with agent/'s real HiPRAG loop, and Debian's Chromium. The run page shows the trainer's phase while it works, and
the first step's reward is not zero (a base model that never writes the format would score 0 on every rollout).

The warm-started model is the demo's own (trainer.warm_start.ensure_demo_warm_model), made once per machine under
``SEARCHLAB_MODEL_CACHE`` (default: ~/.cache/searchlab, the machine's) — like the SmolLM2 conversion, about 40 CPU minutes the
first time on a 2-core machine, seconds after.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from unittest import mock

import pytest

from tests import demo_warm_model
from tests.conftest import shared_dir
from tests.webapp.celery_worker import celery_worker
from tests.webapp.training.test_browser import CHROMIUM, CHROMIUM_ARGS
from webapp.accounts.models import Role
from webapp.accounts.services import user_create
from webapp.runs.models import MetricPoint, Run
from webapp.training.tasks import training_supervise_task

# The machine's model cache, as tests/conftest.py's smollm2_path and .ci/run use: a new clone reuses it.
CACHE = demo_warm_model.CACHE
SCREENSHOT = Path(os.environ.get("WARM_RUN_SCREENSHOT", "/tmp/searchlab-warm-run.png"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium: tests/browser_setup.sh"),
]


@pytest.fixture(scope="module")
def model_cache() -> Path:
    """VAR_DIR of the demo's models: SmolLM2 converted and warm-started once, then reused."""
    from agent import setup_model
    from trainer.warm_start import ensure_demo_warm_model

    demo_warm_model.wait()  # started when collection ended, if the cache lacked it (tests/demo_warm_model.py)
    setup_model.setup_model(CACHE)
    ensure_demo_warm_model(CACHE, shared_dir())
    return CACHE


@pytest.fixture
def demo_ready(model_cache, settings, tmp_path):
    """`manage.py demo`'s state: the demo data, its index, the warm-started model recorded as a run."""
    from webapp.demo.services import demo_prepare_training, demo_seed

    settings.VAR_DIR = model_cache
    settings.TRAINING_RUNS_DIR = tmp_path / "runs"
    settings.RETRIEVAL_INDEX_DIR = tmp_path / "indexes"
    settings.RETRIEVAL_EMBEDDINGS_DIR = tmp_path / "embeddings"
    demo_seed()
    demo_prepare_training(say=lambda _: None)
    env = {"TRAINING_RUNS_DIR": str(tmp_path / "runs"), "SEARCHLAB_VAR_DIR": str(model_cache)}
    with celery_worker(tmp_path, queue="train", env=env, grace=30) as worker:

        def enqueue(run_id: int) -> None:
            training_supervise_task.apply_async(args=[run_id], queue=worker.queue, **worker.send_options)

        with mock.patch.object(training_supervise_task, "delay", side_effect=enqueue):
            yield worker.log


@pytest.mark.django_db(transaction=True)
def test_a_warm_started_hiprag_run_from_the_demo_form_earns_a_non_zero_reward(live_server, demo_ready):
    from playwright.sync_api import sync_playwright

    user_create(username="rey2", password="pw-rey-123456", role=Role.RESEARCHER)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "rey2")
        page.fill("input[name=password]", "pw-rey-123456")
        page.click("button[type=submit]")
        page.goto(f"{live_server.url}/training/new/")
        # The demo's defaults, untouched: the warm model, the agent rollout on the demo index, the evidence judge.
        assert page.input_value("input[name=model_path]").endswith("SmolLM2-135M-Instruct-warm")
        assert page.input_value("select[name=rollout]") == "agent"
        assert page.input_value("select[name=index]") != ""
        assert page.input_value("select[name=judge]") == "evidence"
        assert page.input_value("select[name=method]") == "hiprag"
        page.fill("input[name=name]", "warm-hiprag")
        page.fill("input[name=max_steps]", "1")  # one step of 2 questions × 4 rollouts is the check
        page.click("#start-run")
        page.wait_for_url("**/runs/*/")

        # The trainer says what it is doing while the first step runs (no blank wait for the first point).
        # (It shows "loading" first, then the step's phases.)
        page.wait_for_function(
            "(document.getElementById('run-progress') || {innerText: ''}).innerText.includes('step 1 of 1')",
            timeout=300_000,
        )
        phase = page.inner_text("#run-progress")
        page.screenshot(path=str(SCREENSHOT.with_name(SCREENSHOT.stem + "-progress.png")), full_page=True)
        page.wait_for_function(
            "Number(document.getElementById('run-curves').dataset.points) > 0", timeout=900_000
        )
        page.wait_for_selector(".curve[data-group=reward] canvas")
        reward = page.evaluate(
            """async () => {
                const url = document.getElementById('run-curves').dataset.metricsUrl + '?key=reward/mean';
                const body = await (await fetch(url)).json();
                const rows = body.results || body;
                return rows.map(p => p.value);
            }"""
        )
        page.screenshot(path=str(SCREENSHOT), full_page=True)
        browser.close()

    run = Run.objects.get(name="warm-hiprag")
    assert "step 1 of 1" in phase, phase
    points = list(MetricPoint.objects.filter(run=run, key="reward/mean").values_list("value", flat=True))
    assert points and points[0] > 0, (points, demo_ready.read_text()[-3000:])
    assert reward and reward[0] > 0  # what the page itself fetched
    deadline = time.monotonic() + 120
    while Run.objects.get(pk=run.pk).is_active and time.monotonic() < deadline:
        time.sleep(1)
    assert Run.objects.get(pk=run.pk).status == Run.Status.FINISHED
