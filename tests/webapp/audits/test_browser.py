"""Two annotators label a small audit entirely by keyboard; a researcher adjudicates their disagreement, closes the
audit and downloads the export. Real parts: the live Django server and Debian's Chromium driven by Playwright
(tests/browser_setup.sh installs both; never `playwright install`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.webapp.factories import JudgeVerdictFactory, RunFactory, StepFactory
from webapp.accounts.models import Role
from webapp.accounts.services import user_create
from webapp.audits.models import Adjudication, Audit, FrozenReport, Label
from webapp.audits.services import audit_create

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

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium: tests/browser_setup.sh"),
]


def login(browser, base: str, username: str):
    page = browser.new_context(accept_downloads=True).new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"pw-{username}-123456")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return page


def annotate_by_keyboard(
    page, base: str, audit_id: int, keys_per_item: list[list[str]], comment: str
) -> None:
    """From the queue's "resume" link, label each trajectory's steps with number keys, then ``n`` to the next."""
    page.goto(f"{base}/audits/queue/")
    page.click(f"a[href='/audits/queue/{audit_id}/resume/']")
    for number, keys in enumerate(keys_per_item):
        page.wait_for_selector("li.step:focus")  # the workspace starts on the first unlabelled step
        for key in keys:
            page.keyboard.press(key)
        if number == 0 and comment:
            # Back to the first step (k), comment (c), save (Enter), back to the steps (Esc).
            for _ in keys:
                page.keyboard.press("k")
            page.keyboard.press("c")
            page.keyboard.type(comment)
            page.keyboard.press("Enter")
            page.keyboard.press("Escape")
        n_steps = page.locator("li.step").count()
        page.wait_for_function(
            f"document.querySelectorAll('.saved').length === {n_steps} && "
            "Array.from(document.querySelectorAll('.saved')).every(s => s.textContent.startsWith('saved:'))"
        )
        if number + 1 < len(keys_per_item):
            with page.expect_navigation():
                page.keyboard.press("n")


@pytest.mark.django_db(transaction=True)
def test_two_annotators_a_researcher_adjudicates_closes_and_exports(live_server, tmp_path):
    from playwright.sync_api import sync_playwright

    ann = user_create(username="ann", password="pw-ann-123456", role=Role.ANNOTATOR)
    bob = user_create(username="bob", password="pw-bob-123456", role=Role.ANNOTATOR)
    user_create(username="rey", password="pw-rey-123456", role=Role.RESEARCHER)
    run = RunFactory(name="browser-audit")
    for position in range(2):
        search = StepFactory(
            trajectory__run=run, index=0, kind="search", query=f"who directed film {position}"
        )
        StepFactory(
            trajectory=search.trajectory, index=1, kind="non_search", query=None, conclusion="So Person 1."
        )
        JudgeVerdictFactory(step=search, outcome="true", judge_model="gpt-4.1-mini")
    audit = audit_create(
        name="browser audit",
        run_ids=[run.pk],
        sample_size=2,
        seed=3,
        annotators=[ann, bob],
        annotators_per_item=2,
    )
    first_search = audit.items.get(position=0).trajectory.steps.get(index=0)
    base = live_server.url

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        # Ann: "necessary" (1) on every search, "correct" (1) on every non-search step, a comment on the first.
        annotate_by_keyboard(
            login(browser, base, "ann"), base, audit.pk, [["1", "1"], ["1", "1"]], "new query"
        )
        # Bob: "unnecessary" (2) on the first search — the disagreement — and the rest as Ann.
        annotate_by_keyboard(login(browser, base, "bob"), base, audit.pk, [["2", "1"], ["1", "1"]], "")

        page = login(browser, base, "rey")
        page.goto(f"{base}/audits/{audit.pk}/adjudicate/")
        row = page.locator(f"#annotators-{first_search.pk}")
        assert "new query" in row.inner_text()
        row.locator("input[value=unnecessary]").check()  # saved at once
        page.wait_for_selector(f"#annotators-result-{first_search.pk}:has-text('final: unnecessary')")

        page.goto(f"{base}/audits/{audit.pk}/report/")
        assert "1 step adjudicated" in page.inner_text("body")
        with page.expect_navigation():
            page.click("#audit-close")
        assert page.get_attribute("#audit-status", "data-status") == "closed"
        report_id = int(page.get_attribute("#frozen-report", "data-report"))
        with page.expect_download() as download:
            page.click("#export-jsonl")
        path = tmp_path / "audit.jsonl"
        download.value.save_as(path)
        browser.close()

    assert Label.objects.filter(item__audit=audit).count() == 8
    assert Label.objects.get(annotator=ann, step=first_search).comment == "new query"
    assert Adjudication.objects.get(audit=audit).label == "unnecessary"
    assert Audit.objects.get(pk=audit.pk).status == Audit.Status.CLOSED
    assert FrozenReport.objects.get(audit=audit).pk == report_id
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    by_record = {
        record: [line for line in lines if line["record"] == record]
        for record in ("audit", "label", "report")
    }
    assert by_record["audit"][0]["seed"] == 3 and by_record["audit"][0]["frozen_report_id"] == report_id
    assert len(by_record["label"]) == 8
    (report,) = by_record["report"]
    assert report["n_adjudicated"] == 1 and report["frozen_report_id"] == report_id
    over = next(d for d in report["detectors"] if d["detector"] == "over_search")
    # The judge said over-search on both searches: the adjudicated one agrees, the unanimous "necessary" does not.
    assert (over["n_compared"], over["percent_agreement"]["value"]) == (2, 0.5)
