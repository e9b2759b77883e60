"""Judge-corrected OSR/USR: counts gathered from runs and audits, the choice of audit, the pages and the API."""

from __future__ import annotations

import pytest

from scoring.correct import AuditCounts, rogan_gladen
from tests.webapp.factories import AuditItemFactory, RunFactory, StepFactory, TrajectoryFactory, UserFactory
from webapp.audits import correction, paired_correction
from webapp.audits.models import Audit
from webapp.audits.services import label_save
from webapp.runs.models import Run
from webapp.trajectories.judge_versions import judge_version_get_or_create
from webapp.trajectories.models import JudgeVerdict

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db):
    from webapp.demo.services import demo_seed

    demo_seed()
    return Run.objects.get(name="Search-R1 baseline (demo)"), Run.objects.get(name="HiPRAG (demo)")


def scripted(corrections):
    return next(c for c in corrections if c.version.name.startswith("scripted-judge·hiprag-prompt@"))


def test_the_demo_hiprag_run_gets_raw_and_corrected_rates_from_its_audit(demo):
    _, hiprag = demo
    found = correction.run_corrections(run_id=hiprag.pk)
    # The run's own judge (the team's verdicts, the report's raw rates) comes first; it flags nothing, so its
    # sensitivity is 0 and there is no corrected number, with the reason.
    assert found[0].version.name.startswith("imported·team-labels@")
    assert all("se + sp <= 1" in d.reason for d in found[0].detectors)
    judge = scripted(found)
    assert judge.audit is not None and judge.provisional  # the demo audit stays open: ann can still label
    by = {d.detector: d for d in judge.detectors}
    flagged = {
        detector: JudgeVerdict.objects.filter(
            version=judge.version, detector=detector, outcome="true"
        ).count()
        for detector in by
    }
    for detector, d in by.items():
        assert d.n_flagged == flagged[detector] and d.reason is None
        c = d.counts
        se, sp = c.tp / (c.tp + c.fn), c.tn / (c.tn + c.fp)
        assert d.rate.sensitivity == pytest.approx(se) and d.rate.specificity == pytest.approx(sp)
        assert d.corrected == pytest.approx(rogan_gladen(d.raw, se, sp))
        assert d.rate.low <= d.corrected <= d.rate.high
    # Over-search: the adjudicated step (annotators split, adjudicated "necessary") is a true negative.
    assert by["over_search"].counts == AuditCounts(tp=2, fp=1, fn=1, tn=6)
    assert by["under_search"].counts == AuditCounts(tp=1, fp=1, fn=0, tn=1)


@pytest.mark.slow  # the demo's seed and the report's first computation: about 7 s
def test_the_evaluation_report_shows_raw_and_corrected_side_by_side(researcher_client, demo):
    _, hiprag = demo
    page = researcher_client.get(f"/evaluation/runs/{hiprag.pk}/report/").content.decode()
    judge = scripted(correction.run_corrections(run_id=hiprag.pk))
    assert "Judge-corrected OSR / USR" in page and judge.version.name in page
    for d in judge.detectors:
        assert d.corrected_shown in page and d.interval in page and d.raw_shown in page
    assert "No corrected OSR: se + sp &lt;= 1" in page  # the team's verdicts say why they cannot be corrected


def test_the_compare_page_and_the_api_correct_both_runs_by_one_audit(researcher_client, api_client, demo):
    baseline, hiprag = demo
    page = researcher_client.get(f"/compare/?a={baseline.pk}&b={hiprag.pk}")
    assert page.status_code == 200
    assert len(page.context["corrections_b"]) == 2 and len(page.context["corrected_differences"]) == 2
    body = api_client.get(f"/api/v1/runs/{hiprag.pk}/corrected-rates/?baseline={baseline.pk}").json()
    versions = {v["judge_version"].split("@")[0]: v for v in body["versions"]}
    over = versions["scripted-judge·hiprag-prompt"]["detectors"][0]
    assert over["metric"] == "OSR" and over["audit_counts"] == {"tp": 2, "fp": 1, "fn": 1, "tn": 6}
    assert over["corrected"] == pytest.approx(rogan_gladen(over["raw"], 2 / 3, 6 / 7))
    # Both runs share only the team's version, which cannot be corrected: the difference says why.
    assert [d["metric"] for d in body["differences"]] == ["OSR", "USR"]
    assert all(d["difference"] is None and d["reason"] for d in body["differences"])
    assert api_client.get(f"/api/v1/runs/{hiprag.pk}/corrected-rates/?baseline=x").status_code == 400
    # The audit's API and exports name each judge version (and its model).
    audit = Audit.objects.get(name__contains="demo")
    sections = api_client.get(f"/api/v1/audits/{audit.pk}/agreement/").json()["detectors"]
    assert {(d["judge_model"], d["judge_version"].split("@")[0]) for d in sections} == {
        ("team-labels", "imported·team-labels"),
        ("scripted-judge", "scripted-judge·hiprag-prompt"),
    }
    from webapp.audits.export import table_rows

    rows = list(table_rows(audit, "verdicts"))
    assert {row["judge_version"] for row in rows} == {d["judge_version"] for d in sections}
    assert api_client.get("/api/v1/runs/999999/corrected-rates/").status_code == 404


def audited_run(outcomes_humans, *, status=Audit.Status.OPEN, version=None):
    """A run of one trajectory per (judge outcome, human label) pair on a search step, all in one audit."""
    version = version or judge_version_get_or_create({"v": 1, "kind": "openai", "model": "m", "x": 1})
    run = RunFactory(method="hiprag")
    audit = Audit.objects.create(name="a", sample_size=len(outcomes_humans), status=Audit.Status.OPEN)
    annotator = UserFactory()
    for position, (outcome, human) in enumerate(outcomes_humans):
        trajectory = TrajectoryFactory(run=run)
        step = StepFactory(trajectory=trajectory, index=0, kind="search", query="q")
        JudgeVerdict.objects.create(
            trajectory=trajectory,
            step=step,
            detector="over_search",
            outcome=outcome,
            judge_model="m",
            version=version,
        )
        item = AuditItemFactory(audit=audit, trajectory=trajectory, position=position)
        if human:
            item.assignees.add(annotator)
            label_save(item=item, annotator=annotator, step_id=step.pk, label=human)
    Audit.objects.filter(pk=audit.pk).update(status=status)
    audit.refresh_from_db()
    return run, audit, version


def test_a_closed_audit_is_preferred_and_a_run_without_labels_says_why():
    pairs = [("true", "unnecessary"), ("false", "necessary"), ("true", "necessary"), ("false", "necessary")]
    run, audit, version = audited_run(pairs)
    found = correction.run_correction(run_id=run.pk, version=version)
    assert found.audit == audit and found.provisional
    _, closed, _ = audited_run(pairs, status=Audit.Status.CLOSED, version=version)
    again = correction.run_correction(run_id=run.pk, version=version)
    assert again.audit == closed and not again.provisional
    over = {d.detector: d for d in again.detectors}["over_search"]
    assert over.counts == AuditCounts(tp=1, fp=1, fn=0, tn=2)
    unlabelled, _, bare = audited_run([("true", None)], version=judge_version_get_or_create({"v": 1, "k": 2}))
    lone = correction.run_correction(run_id=unlabelled.pk, version=bare)
    assert lone.audit is None and all("no audit of judge version" in d.reason for d in lone.detectors)
    assert lone.detectors[0].raw == 1.0 and lone.detectors[0].corrected is None


def test_the_paired_difference_shares_one_audit_draw():
    perfect = [AuditCounts(1, 0, 0, 1)] * 5
    pairs = [((1, 4), (0, 4)), ((2, 4), (1, 4)), ((0, 4), (0, 4)), ((3, 4), (1, 4))]
    raw, difference, low, high, reason = paired_correction.paired_corrected_difference(
        pairs, perfect, n_boot=500
    )
    # A perfect judge (se = sp = 1) corrects nothing: the corrected difference is the raw one.
    assert reason is None and difference == pytest.approx(raw) == pytest.approx(2 / 16 - 6 / 16)
    assert low <= difference <= high
    blind = [AuditCounts(0, 0, 1, 1)] * 3  # never flags: se = 0
    assert paired_correction.paired_corrected_difference(pairs, blind)[4].startswith("se + sp <= 1")
    assert (
        paired_correction.paired_corrected_difference(pairs, [])[4]
        == "the audit has no labels for this detector"
    )


def test_the_experiment_table_is_corrected_live(demo):
    from django.template.loader import render_to_string

    baseline, hiprag = demo
    result = {
        "rows": [{"label": "start", "run_id": baseline.pk}, {"label": "trained", "run_id": hiprag.pk}],
        "differences": [{"label": "trained − start", "baseline_run_id": baseline.pk, "run_id": hiprag.pk}],
    }
    found = paired_correction.experiment_corrections(result=result)
    assert [run_id for _, run_id, _ in found.rows] == [baseline.pk, hiprag.pk]
    html = render_to_string("audits/_corrected_experiment.html", {"corrected": found})
    assert "experiment-corrected-table" in html and "no corrected Δ" in html
    assert found.rows[1][2].version.name in html
