"""The apps above ``runs`` fill its hooks in their ``AppConfig.ready()``: the run pages need no import of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from webapp.runs import hooks
from webapp.runs.models import Run
from webapp.training import model_checks
from webapp.training.services import training_mark_crashed, training_stop_request


def test_training_supervises_train_and_warm_start_runs_only() -> None:
    for kind in Run.SUPERVISED_KINDS:
        supervisor = hooks.supervisor_for(kind)
        assert supervisor is not None
        assert (supervisor.mark_crashed, supervisor.stop) == (training_mark_crashed, training_stop_request)
    assert hooks.supervisor_for(Run.Kind.EVAL) is None


@pytest.mark.django_db
def test_run_parts_and_summary_rows_come_from_the_apps_that_hold_them() -> None:
    run = Run.objects.create(name="r", kind=Run.Kind.EVAL)
    parts = hooks.run_parts(run)
    assert list(parts) == ["trajectories"]
    assert list(parts["trajectories"]) == []
    with pytest.raises(KeyError):
        hooks.run_parts(run, ["no such part"])
    assert hooks.summary_rows([run.pk]) == {}
    assert hooks.run_panels(run) == ["evaluation/_report_slot.html", "audits/_run_drift_panel.html"]
    run.kind = Run.Kind.TRAIN
    assert hooks.run_panels(run) == ["audits/_run_drift_panel.html"]  # the report is an evaluation run's only
    assert model_checks.model_notices() == ["demo/_warm_model_notice_slot.html"]


@pytest.mark.django_db
def test_a_registration_under_a_taken_name_replaces_it(tmp_path: Path) -> None:
    calls: list[Path] = []

    def refuse(path: Path) -> str | None:
        calls.append(path)
        return "busy"

    before = dict(model_checks._checks)
    try:
        model_checks.model_check_register("demo warm model", refuse)
        assert model_checks.model_refusal(tmp_path) == "busy"
        assert calls == [tmp_path] and len(model_checks._checks) == len(before)
    finally:
        model_checks._checks.clear()
        model_checks._checks.update(before)
    assert (
        model_checks.model_refusal(tmp_path) is None
    )  # the demo's own check: no warm start is writing there
