"""A researcher opens an experiment of three seed pairs and reads its per-pair table and pooled row. Real parts: the
live Django server and Debian's Chromium driven by Playwright (tests/browser_setup.sh installs both); the stages are
the scripted ones of tests/webapp/experiments/conftest.py. The page's screenshot goes to EXPERIMENT_SEEDS_SCREENSHOT
(docs/img/experiment-seeds.png is one)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.webapp.experiments.test_seeds import ARMS, seeded_models  # noqa: F401 (a fixture)
from webapp.accounts.models import Role
from webapp.accounts.services import user_create
from webapp.experiments import services

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]
SCREENSHOT = Path(os.environ.get("EXPERIMENT_SEEDS_SCREENSHOT", "/tmp/searchlab-experiment-seeds.png"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium: tests/browser_setup.sh"),
]


@pytest.mark.django_db(transaction=True)
def test_the_page_shows_each_seed_pair_and_the_pooled_row(
    live_server: Any,
    make_spec: Any,
    seeded_models: None,  # noqa: F811
) -> None:
    from playwright.sync_api import sync_playwright

    user_create(username="rey", password="pw-rey-123456", role=Role.RESEARCHER)
    spec = make_spec(arms=ARMS, baseline="outcome", seeds=3, resamples=2000)
    experiment = services.experiment_create(
        user=None, spec=spec, name="outcome vs process, 3 seed pairs", enqueue=False
    )
    experiment = services.experiment_execute(experiment_id=experiment.pk)
    assert experiment.status == "finished", experiment.error

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "rey")
        page.fill("input[name=password]", "pw-rey-123456")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
        table = page.locator("#seed-pairs-process")
        assert table.locator("tr.seed-pair").count() == 3
        assert "pooled (3 pairs)" in table.locator("tr.pooled").inner_text()
        assert table.locator("tr.same-sign td").count() == 2 + 5
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT), full_page=True)
        browser.close()
    assert SCREENSHOT.stat().st_size > 10_000
