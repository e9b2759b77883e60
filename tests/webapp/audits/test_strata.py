"""Stratified audits: strata by training step, verdict and judge disagreement with Horvitz–Thompson weights per
item, the report's weighted and unweighted figures, and the judge drift chart (audit report and run page)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.webapp.factories import JudgeVerdictFactory, RunFactory, StepFactory, TrajectoryFactory
from webapp.audits import sampling, strata
from webapp.audits.models import Audit
from webapp.audits.services import audit_create, audit_transition, label_save
from webapp.trajectories.models import Step, Trajectory

pytestmark = pytest.mark.django_db


def test_it_weights_a_proportional_sample_by_its_strata() -> None:
    candidates = [(1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "b")]
    drawn = sampling.with_weights(candidates, [1, 4, 2], stratified=True)
    assert [(d.id, d.stratum, d.weight) for d in drawn] == [(1, "a", 1.5), (4, "b", 2.0), (2, "a", 1.5)]
    uniform = sampling.with_weights(candidates, [1, 4], stratified=False)
    assert {(d.stratum, d.weight) for d in uniform} == {("", 2.5)}


def test_it_puts_each_runs_trajectories_into_its_own_thirds() -> None:
    rows = [(1, 10, 0), (2, 10, 5), (3, 10, 9), (4, 20, 100), (5, 20, 200), (6, 20, None)]
    assert sampling.step_strata(rows) == [
        (1, "early"),
        (2, "middle"),
        (3, "late"),
        (4, "early"),
        (5, "late"),  # run 20's steps 100–200: 200 is in the last third
        (6, sampling.NO_STEP),
    ]


def test_it_refuses_to_draw_more_than_there_is() -> None:
    with pytest.raises(sampling.SampleTooLarge):
        sampling.weighted_sample([(1, "flagged")], 2, seed=0)
    with pytest.raises(ValueError, match="over-sampling factor"):
        sampling.weighted_sample([(1, "flagged")], 1, seed=0, oversample=0)


def _run_with_flags(n: int, flagged_every: int, *, judge: str = "judge-a") -> list[int]:
    """A training run of ``n`` trajectories (training steps 0…n−1), one search step each, flagged every k-th."""
    run = RunFactory()
    ids = []
    for i in range(n):
        trajectory = TrajectoryFactory(run=run, training_step=i)
        step = StepFactory(trajectory=trajectory, index=0)
        outcome = "true" if i % flagged_every == 0 else "false"
        JudgeVerdictFactory(step=step, detector="over_search", outcome=outcome, judge_model=judge)
        ids.append(trajectory.pk)
    return ids


def test_it_oversamples_flagged_trajectories_and_stores_their_weights() -> None:
    ids = _run_with_flags(40, flagged_every=10)  # 4 flagged of 40
    run_id = Trajectory.objects.get(pk=ids[0]).run_id
    audit = audit_create(
        name="by verdict", run_ids=[run_id], sample_size=10, seed=2, stratification="verdict", oversample=5
    )
    items = list(audit.items.values_list("stratum", "weight"))
    flagged = [w for s, w in items if s == "flagged"]
    # 4 × 5 = 20 against 36: 10 · 20/56 = 3.6 → 4 flagged (all of them, weight 1), 6 of 36 unflagged (weight 6).
    assert flagged == [1.0] * 4
    assert sorted({w for s, w in items if s == "unflagged"}) == [6.0]
    assert sum(w for _, w in items) == pytest.approx(40)
    assert audit.oversample == 5 and audit.strata_judges == ["judge-a"]


def test_it_stratifies_by_disagreement_between_the_two_busiest_judges() -> None:
    ids = _run_with_flags(12, flagged_every=3, judge="judge-a")
    for position, trajectory_id in enumerate(ids):
        step = Step.objects.get(trajectory_id=trajectory_id)
        JudgeVerdictFactory(step=step, detector="over_search", outcome="false", judge_model="judge-b")
        if position < 2:
            JudgeVerdictFactory(step=step, detector="over_search", outcome="true", judge_model="judge-c")
    run_id = Trajectory.objects.get(pk=ids[0]).run_id
    audit = audit_create(name="d", run_ids=[run_id], sample_size=6, seed=0, stratification="disagreement")
    assert audit.strata_judges == ["judge-a", "judge-b"]
    strata_of = dict(audit.items.values_list("trajectory_id", "stratum"))
    for trajectory_id, stratum in strata_of.items():
        assert stratum == ("disagree" if ids.index(trajectory_id) % 3 == 0 else "agree")


@pytest.fixture
def step_audit(annotator):
    """A 30-step training run audited by step; the human agrees with the judge except on two late steps."""
    ids = _run_with_flags(30, flagged_every=4)
    run_id = Trajectory.objects.get(pk=ids[0]).run_id
    audit = audit_create(
        name="drift", run_ids=[run_id], sample_size=15, seed=1, stratification="step", annotators=[annotator]
    )
    wrong = 0
    for item in audit.items.select_related("trajectory").order_by("trajectory__training_step"):
        step = item.trajectory.steps.get()
        flagged = step.verdicts.get().outcome == "true"
        human = flagged
        if item.stratum == "late" and wrong < 2:
            human, wrong = not flagged, wrong + 1
        label_save(
            item=item, annotator=annotator, step_id=step.pk, label="unnecessary" if human else "necessary"
        )
    return audit


def test_it_reports_strata_weights_and_drift(step_audit) -> None:
    report = strata.strata_report(audit=step_audit)
    assert report is not None
    assert [row.stratum for row in report.strata] == ["early", "middle", "late"]
    assert sum(row.population for row in report.strata) == pytest.approx(30)
    (figures,) = report.figures
    assert figures.judge == "judge-a" and figures.weighted.n_steps == 15
    (drift,) = report.drift
    assert [p.phase for p in drift.points] == ["early", "middle", "late"]
    early, _, late = drift.points
    assert (
        early.accuracy.accuracy == 1.0 and late.accuracy.accuracy is not None and late.accuracy.accuracy < 1.0
    )
    assert early.first_step == 0 and late.last_step == 29
    # The early phase's judge is perfect, so its corrected rate is its raw rate.
    assert early.rate.corrected == pytest.approx(early.rate.raw)
    assert "<polyline" in drift.svg and 'data-detector="over_search"' in drift.svg


def test_it_shows_the_drift_on_the_audit_report_and_the_run_page(step_audit, researcher_client) -> None:
    page = researcher_client.get(reverse("audits:report", args=[step_audit.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Strata and weights" in html and 'data-stratum="late"' in html
    assert "Judge drift over training" in html and "<svg" in html
    run = step_audit.source_runs.get()
    run_page = researcher_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert 'id="judge-drift"' in run_page and "drift-chart" in run_page


def test_it_creates_an_oversampled_audit_from_the_form(researcher_client, annotator) -> None:
    ids = _run_with_flags(20, flagged_every=5)
    run_id = Trajectory.objects.get(pk=ids[0]).run_id
    response = researcher_client.post(
        reverse("audits:new"),
        {
            "name": "flagged 5x",
            "runs": [run_id],
            "sample_size": 8,
            "seed": 0,
            "stratification": "verdict",
            "oversample": 5,
            "annotators": [annotator.pk],
            "annotators_per_item": 1,
            "blind": "on",
        },
    )
    assert response.status_code == 302
    audit = Audit.objects.get(name="flagged 5x")
    assert audit.oversample == 5
    assert audit.items.filter(stratum="flagged").count() == 4  # every flagged trajectory: 4 × 5 ≫ its share


def test_it_keeps_the_drift_under_the_latest_frozen_report(step_audit, researcher, researcher_client) -> None:
    audit_transition(audit=step_audit, action="close", by=researcher)
    page = researcher_client.get(reverse("audits:report", args=[step_audit.pk]), follow=True)
    html = page.content.decode()
    assert 'id="frozen-report"' in html
    assert "Strata and weights" in html and "drift-chart" in html
