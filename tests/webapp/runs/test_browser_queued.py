"""A researcher opens a train run queued behind the demo's warm start: its page says what it waits for, and the
polled status moves on with the warm start's heartbeat. Real parts: the live Django server and Debian's Chromium
driven by Playwright (tests/browser_setup.sh installs both). The page's screenshot goes to RUN_QUEUED_SCREENSHOT
(docs/img/run-queued.png is one)."""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from tests.webapp.factories import RunFactory
from tests.webapp.training.test_browser import CHROMIUM, CHROMIUM_ARGS
from webapp.accounts.models import Role
from webapp.accounts.services import user_create
from webapp.runs.models import Run

SCREENSHOT = Path(os.environ.get("RUN_QUEUED_SCREENSHOT", "/tmp/searchlab-run-queued.png"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium: tests/browser_setup.sh"),
]


def _heartbeat(step: int, eta_seconds: float) -> dict[str, object]:
    """A warm start's heartbeat as trainer.progress writes it, now."""
    return {
        "phase": "train",
        "detail": "supervised warm start",
        "step": step,
        "max_steps": 42,
        "eta_seconds": eta_seconds,
        "time": time.time(),
    }


@pytest.mark.django_db(transaction=True)
def test_a_queued_runs_page_says_what_it_waits_for_and_follows_it(live_server: Any) -> None:
    from playwright.sync_api import expect, sync_playwright

    user_create(username="rey", password="pw-rey-123456", role=Role.RESEARCHER)
    warm = RunFactory(
        name="demo-warm-start",
        kind=Run.Kind.WARM_START,
        algorithm="sft",
        status=Run.Status.RUNNING,
        started_at=timezone.now() - dt.timedelta(minutes=24),
        heartbeat_at=timezone.now(),
        progress=_heartbeat(12, 540),
    )
    mine = RunFactory(name="grpo-hiprag-smollm2", kind=Run.Kind.TRAIN, algorithm="grpo")
    Run.objects.filter(pk=mine.pk).update(created_at=timezone.now() - dt.timedelta(minutes=3))

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 700})
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "rey")
        page.fill("input[name=password]", "pw-rey-123456")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.goto(f"{live_server.url}/runs/{mine.pk}/")
        queued = page.locator("#run-queued")
        expect(queued).to_contain_text(
            f"Queued behind run #{warm.pk} demo-warm-start (warm start), step 12 of 42, about 9 min left"
        )
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))
        # The status fragment is polled every 3 s while the run waits: the warm start's next heartbeat shows.
        # (Written from a thread: Playwright's sync API runs an event loop here, where Django refuses the ORM.)
        beat = threading.Thread(
            target=lambda: Run.objects.filter(pk=warm.pk).update(progress=_heartbeat(13, 480))
        )
        beat.start()
        beat.join()
        expect(queued).to_contain_text("step 13 of 42, about 8 min left", timeout=10_000)
        browser.close()
    assert SCREENSHOT.stat().st_size > 10_000
