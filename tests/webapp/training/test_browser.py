"""A researcher starts a 3-step HiPRAG GRPO run from the browser, watches its curves grow, and stops it.

Real parts: the live Django server, a Celery worker process on the train queue (the filesystem broker in a folder
of this test's own, or Redis when CELERY_BROKER_URL is set), the supervisor, ``python -m trainer.train`` on the tiny
random model, and Debian's Chromium driven by Playwright (tests/browser_setup.sh installs both).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from unittest import mock

import pytest

from tests.webapp.celery_worker import celery_worker
from webapp.accounts.models import Role
from webapp.accounts.services import user_create
from webapp.runs.models import MetricPoint, Run
from webapp.training.tasks import training_supervise_task

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOT = Path(os.environ.get("RUN_PAGE_SCREENSHOT", "/tmp/searchlab-run-page.png"))
MODEL = os.environ.get("BROWSER_TEST_MODEL", "tiny-random")  # the demo: var/models/SmolLM2-135M-Instruct
STOP = os.environ.get("BROWSER_TEST_STOP", "1") != "0"  # 0: let the 3 steps finish (the demo), then check

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium: tests/browser_setup.sh"),
]


@pytest.fixture
def train_worker(tmp_path, settings):
    """A Celery worker process consuming a train queue, and the trainer's runs folder under tmp_path."""
    settings.TRAINING_RUNS_DIR = tmp_path / "runs"
    env = {"TRAINING_RUNS_DIR": str(tmp_path / "runs"), "TRAINING_STOP_GRACE_SECONDS": "10"}
    with celery_worker(tmp_path, queue="train", env=env, grace=30) as worker:

        def enqueue(run_id: int) -> None:
            training_supervise_task.apply_async(args=[run_id], queue=worker.queue, **worker.send_options)

        # The live server's request thread enqueues through this: same task, this test's queue and broker folder.
        with mock.patch.object(training_supervise_task, "delay", side_effect=enqueue):
            yield worker.log


@pytest.mark.django_db(transaction=True)
def test_it_starts_watches_and_stops_a_training_run_in_the_browser(live_server, train_worker):
    from playwright.sync_api import sync_playwright

    user_create(username="rey", password="pw-rey-123456", role=Role.RESEARCHER)
    started = time.monotonic()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.on("dialog", lambda dialog: dialog.accept())  # "Stop run …?"
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "rey")
        page.fill("input[name=password]", "pw-rey-123456")
        page.click("button[type=submit]")
        page.goto(f"{live_server.url}/training/new/")
        page.fill("input[name=name]", "browser-hiprag-grpo")
        page.select_option("select[name=method]", "hiprag")
        page.select_option("select[name=algorithm]", "grpo")
        page.fill("input[name=model_path]", MODEL)
        page.select_option("select[name=rollout]", "scripted")
        page.fill("input[name=max_steps]", "3")
        page.fill("input[name=num_generations]", "2")
        page.fill("input[name=per_device_train_batch_size]", "2")
        page.fill("input[name=max_completion_length]", "256")
        # 0: the completion length (the demo's 512-token rollout budget would not fit in 256)
        page.fill("input[name=max_rollout_tokens]", "0")
        page.fill("input[name=sample_every]", "1")
        page.click("#start-run")
        page.wait_for_url("**/runs/*/")

        # The curves gain points while the run is going (uPlot draws a canvas per chart group).
        page.wait_for_function(
            "Number(document.getElementById('run-curves').dataset.points) > 0", timeout=240_000
        )
        page.wait_for_selector(".curve[data-group=reward] canvas")
        seconds_to_first_points = time.monotonic() - started
        page.screenshot(path=str(SCREENSHOT), full_page=True)

        if STOP and page.locator("#stop-run").count():
            page.click("#stop-run")
        page.wait_for_function(
            "['cancelled', 'finished'].includes(document.getElementById('run-status').dataset.status)",
            timeout=120_000,
        )
        page.wait_for_function(
            "document.getElementById('run-curves').dataset.active === 'false'", timeout=30_000
        )
        final_status = page.get_attribute("#run-status", "data-status")
        page.screenshot(path=str(SCREENSHOT.with_name(SCREENSHOT.stem + "-final.png")), full_page=True)
        browser.close()

    run = Run.objects.get(name="browser-hiprag-grpo")
    assert final_status == run.status and run.status in (Run.Status.CANCELLED, Run.Status.FINISHED), (
        f"{run.status}: {run.error}\n{train_worker.read_text()[-3000:]}"
    )
    assert MetricPoint.objects.filter(run=run, key="reward/mean").exists()
    seconds = (run.finished_at - run.started_at).total_seconds()
    print(
        f"first points after {seconds_to_first_points:.1f} s; {run.status} after {seconds:.1f} s of training"
    )
