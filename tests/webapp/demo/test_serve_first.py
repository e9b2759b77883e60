"""`manage.py demo` serves first: the warm start is a warm-start run queued beside the server, and the forms say so."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from trainer import warm_start
from webapp.accounts.models import Role
from webapp.accounts.services import user_create
from webapp.demo.selectors import warm_model_preparing
from webapp.demo.services import demo_warm_start
from webapp.runs.models import Run
from webapp.training.models import TrainingProcess
from webapp.training.tasks import training_supervise_task

pytestmark = pytest.mark.django_db


def _values(var: Path) -> dict[str, object]:
    """The demo's warm-start config without building wiki_multihop's BM25 index (the trainer's tests do)."""
    return {
        "output_dir": str(var / "models" / warm_start.WARM_MODEL_NAME),
        "index": str(var / "index"),
        "model": {"path": str(var / "models" / "SmolLM2-135M-Instruct")},
        "data": {"path": str(var / "questions.jsonl")},
        "methods": list(warm_start.DEMO_METHODS),
        "demo_recipe": warm_start.DEMO_RECIPE,
    }


def test_the_warm_start_is_queued_as_a_run_and_the_forms_say_it_is_being_prepared(
    settings, tmp_path, client, django_capture_on_commit_callbacks, monkeypatch
):
    settings.VAR_DIR = tmp_path
    base = tmp_path / "models" / "SmolLM2-135M-Instruct"
    base.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    half = tmp_path / "models" / warm_start.WARM_MODEL_NAME  # a warm start stopped half-way: started afresh
    half.mkdir()
    (half / "metrics.jsonl").write_text(
        json.dumps({"step": 9, "time": 1.0, "key": "loss", "value": 9.0}) + "\n"
    )
    monkeypatch.setattr(warm_start, "demo_warm_start_values", lambda var, shared, base=None: _values(var))
    said: list[str] = []

    with (
        mock.patch.object(training_supervise_task, "delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = demo_warm_start(say=said.append)
        assert demo_warm_start(say=said.append) == run  # queued once: a second call finds it

    assert run is not None
    delay.assert_called_once_with(run.pk)
    run.refresh_from_db()
    assert (run.kind, run.algorithm, run.status) == (
        Run.Kind.WARM_START,
        Run.Algorithm.SFT,
        Run.Status.PENDING,
    )
    assert run.config["demo_recipe"] == warm_start.DEMO_RECIPE
    assert TrainingProcess.objects.filter(run=run).exists()
    assert not (half / "metrics.jsonl").exists()
    assert len(said) == 1 and f"warm-start run #{run.pk}" in said[0]
    assert warm_model_preparing().where == "waiting for the train worker"

    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        progress={"phase": "train", "step": 3, "max_steps": 12, "eta_seconds": 600.0, "detail": "warm start"},
    )
    user_create(username="rey", password="pw-rey-123456", role=Role.RESEARCHER)
    client.login(username="rey", password="pw-rey-123456")
    for url in ("/training/new/", "/evaluation/new/", "/experiments/"):
        page = client.get(url).content.decode()
        assert 'id="warm-model-notice"' in page, url
        assert f'href="/runs/{run.pk}/"' in page and "step 3 of 12" in page and "min left" in page, url

    # The runs page and the run's page name every format the warm start teaches, not only the first.
    for url in ("/", f"/runs/{run.pk}/"):
        assert "HiPRAG + Search-R1" in client.get(url).content.decode(), url

    # A run of the warm model before it is ready: refused, with the reason.
    refused = client.post("/training/new/", {"name": "too early", "model_path": str(half)})
    assert refused.status_code == 400
    assert f"still being prepared by warm start #{run.pk}" in refused.content.decode()

    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED)
    assert warm_model_preparing() is None
    assert 'id="warm-model-notice"' not in client.get("/training/new/").content.decode()


def test_a_warm_start_left_running_by_a_killed_demo_is_marked_crashed_and_started_afresh(
    settings, tmp_path, django_capture_on_commit_callbacks, monkeypatch
):
    import socket
    import subprocess

    from django.utils import timezone

    from webapp.demo.services import demo_mark_orphans_crashed

    settings.VAR_DIR = tmp_path
    base = tmp_path / "models" / "SmolLM2-135M-Instruct"
    base.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    monkeypatch.setattr(warm_start, "demo_warm_start_values", lambda var, shared, base=None: _values(var))
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = Run.objects.create(
        name="SmolLM2 warm start (demo)",
        kind=Run.Kind.WARM_START,
        algorithm=Run.Algorithm.SFT,
        status=Run.Status.RUNNING,
        heartbeat_at=timezone.now(),
        config={"demo_recipe": warm_start.DEMO_RECIPE, "output_dir": str(tmp_path / "w")},
    )
    TrainingProcess.objects.create(
        run=orphan,
        run_dir=str(tmp_path),
        hostname=socket.gethostname(),
        supervisor_pid=dead.pid,
        pid=dead.pid,
    )

    assert demo_mark_orphans_crashed() == [orphan.pk]
    with (
        mock.patch.object(training_supervise_task, "delay"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        fresh = demo_warm_start(say=lambda _: None)

    orphan.refresh_from_db()
    assert orphan.status == Run.Status.CRASHED
    assert fresh is not None and fresh.pk != orphan.pk and fresh.status == Run.Status.PENDING
