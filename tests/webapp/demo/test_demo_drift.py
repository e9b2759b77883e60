"""The demo's HiPRAG training run audited by training step: drift with corrected rates per phase at first login."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model

from webapp.audits.models import Adjudication, Audit, AuditItem, Label
from webapp.audits.strata import strata_report
from webapp.demo.services import DEMO_DRIFT_AUDIT, DEMO_TRAINING_RUN, demo_seed
from webapp.runs.models import Run
from webapp.trajectories.models import JudgeVerdict, Trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded():
    started = time.perf_counter()
    demo_seed()
    return time.perf_counter() - started


def test_the_demo_training_run_holds_every_step_judged_by_a_versioned_scripted_judge(seeded):
    run = Run.objects.get(name=DEMO_TRAINING_RUN)
    assert run.kind == Run.Kind.TRAIN and run.status == Run.Status.FINISHED
    steps = sorted(set(Trajectory.objects.filter(run=run).values_list("training_step", flat=True)))
    assert steps == list(range(12))
    assert Trajectory.objects.filter(run=run).count() == 96
    verdicts = JudgeVerdict.objects.filter(trajectory__run=run)
    assert verdicts.count() > 96
    assert not verdicts.filter(version__isnull=True).exists()
    names = set(verdicts.values_list("version__name", flat=True))
    assert len(names) == 1 and next(iter(names)).startswith("scripted-judge (training)·hiprag-prompt@")


def test_the_demo_audit_by_step_is_labelled_by_two_annotators_with_disagreements_adjudicated(seeded):
    audit = Audit.objects.get(name=DEMO_DRIFT_AUDIT)
    assert audit.stratification == Audit.Stratification.STEP
    strata = sorted(AuditItem.objects.filter(audit=audit).values_list("stratum", flat=True))
    assert {s: strata.count(s) for s in set(strata)} == {"early": 16, "middle": 16, "late": 16}
    labels = Label.objects.filter(item__audit=audit)
    ann, bea = (get_user_model().objects.get(username=name) for name in ("ann", "bea"))
    n_steps = sum(item.trajectory.steps.count() for item in AuditItem.objects.filter(audit=audit))
    assert labels.filter(annotator=ann).count() == labels.filter(annotator=bea).count() == n_steps
    disagreements = {
        step
        for step, n in _label_sets(labels).items()
        if n > 1  # two different labels on one step
    }
    adjudicated = set(Adjudication.objects.filter(audit=audit).values_list("step_id", flat=True))
    assert disagreements and disagreements <= adjudicated


def _label_sets(labels):
    found: dict[int, set[str]] = {}
    for step_id, label in labels.values_list("step_id", "label"):
        found.setdefault(step_id, set()).add(label)
    return {step_id: len(values) for step_id, values in found.items()}


def test_the_drift_chart_shows_corrected_over_search_rates_per_phase_and_a_falling_sensitivity(seeded):
    report = strata_report(audit=Audit.objects.get(name=DEMO_DRIFT_AUDIT))
    assert report is not None
    drift = {d.detector.name: d for d in report.drift}
    over = drift["over_search"]
    assert [p.phase for p in over.points] == ["early", "middle", "late"]
    for point in over.points:
        assert point.rate.corrected is not None, point.rate.reason
        assert point.rate.low <= point.rate.corrected <= point.rate.high
    early, _, late = over.points
    assert late.rate.raw < early.rate.raw  # the policy searches less as it trains
    assert late.accuracy.sensitivity < early.accuracy.sensitivity  # and the judge misses more of what is left


def test_first_login_shows_the_drift_on_the_run_page_and_the_audit_report(seeded, client):
    client.force_login(get_user_model().objects.get(username="rey"))
    run = Run.objects.get(name=DEMO_TRAINING_RUN)
    audit = Audit.objects.get(name=DEMO_DRIFT_AUDIT)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="judge-drift"' in page and DEMO_DRIFT_AUDIT in page
    report = client.get(f"/audits/{audit.pk}/report/").content.decode()
    assert 'id="drift-over_search"' in report


def test_the_demo_seeds_quickly_and_once(seeded):
    assert seeded < 20.0  # make demo's first start (2 loaded cores); typically a few seconds
    runs = Run.objects.count()
    demo_seed()
    assert Run.objects.count() == runs
