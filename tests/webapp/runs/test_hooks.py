"""The apps above ``runs`` fill its hooks in their ``AppConfig.ready()``: the run pages need no import of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.webapp.factories import RunFactory
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
    assert hooks.run_panels(run, "facts") == ["training/_run_facts.html"]
    with pytest.raises(ValueError, match="place must be one of sections, facts"):
        hooks.run_panel_register("x", template="x.html", order=1, place="footer")
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


@pytest.mark.django_db
def test_the_status_fragment_takes_a_supervised_runs_part_from_its_supervisor(researcher_client) -> None:
    heartbeat = {"phase": "update", "step": 3, "max_steps": 8, "time": 4102444800.0}
    train = RunFactory(
        kind=Run.Kind.TRAIN, algorithm=Run.Algorithm.GRPO, status=Run.Status.RUNNING, progress=heartbeat
    )
    evaluation = RunFactory(kind=Run.Kind.EVAL, status=Run.Status.RUNNING)
    train_page = researcher_client.get(f"/runs/{train.pk}/status/").content.decode()
    eval_page = researcher_client.get(f"/runs/{evaluation.pk}/status/").content.decode()
    assert train_page.count('id="stop-run"') == 1 and eval_page.count('id="stop-run"') == 1
    assert "step 3 of 8" in train_page  # the heartbeat's progress line (webapp.runs.progress_view)
    assert 'id="revoke-tokens"' not in train_page  # a local trainer does not report over HTTP
    evaluation.status = Run.Status.FINISHED
    evaluation.save()
    assert 'id="stop-run"' not in researcher_client.get(f"/runs/{evaluation.pk}/status/").content.decode()
