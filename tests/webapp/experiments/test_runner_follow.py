"""The app following its runner's spool: a trainer still running is replayed as a running run whose curve grows, and
the same run ends finished once its trainer exits; evaluations join once their base is stored; a replay of the same
spool by the command finds the browser experiment and adds nothing."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.webapp.experiments.spool_builder import make_spool
from webapp.corpora.models import Index
from webapp.experiments import services
from webapp.experiments.models import Experiment
from webapp.experiments.specs import parse_arm
from webapp.experiments.spool_replay import experiment_spool_follow
from webapp.runs.models import MetricPoint, Run

pytestmark = pytest.mark.django_db

ARMS = (parse_arm("outcome=hiprag:lambda_p=0.0"), parse_arm("process=hiprag:lambda_p=0.4"))


def _browser_experiment(make_spec: Any) -> Experiment:
    """An experiment of this app whose spec is the spool_builder spool's (arms, screen, questions)."""
    spec = make_spec(
        arms=ARMS, baseline="outcome", screen_samples=1, screen_min_passes=0, screen_max_passes=1
    )
    return services.experiment_create(user=None, spec=spec, enqueue=False)


def _set(path: Path, **values: Any) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))


def test_a_running_trainers_curve_is_replayed_live_into_the_run_that_ends_finished(
    make_spec: Any, index: Index, tmp_path: Path
) -> None:
    experiment = _browser_experiment(make_spec)
    out = make_spool(tmp_path, index, leave_out=("eval-outcome-s0", "train-process-s0", "eval-process-s0"))
    trainer = out / "stages" / "train-outcome-s0" / "manifest.json"
    _set(trainer, finished_at=None, exit_code=None)  # the trainer still runs: no final status yet
    batch = trainer.with_name("000000000001.json")
    batch.write_text(json.dumps({k: v for k, v in json.loads(batch.read_text()).items() if k != "final"}))

    first = experiment_spool_follow(experiment.pk, out)

    assert first.added == ["screen-1", "start-hiprag"] and "train-outcome-s0" in first.missing
    running = experiment.links.get(role="train", arm="outcome").run
    assert running.status == Run.Status.RUNNING and MetricPoint.objects.filter(run=running, step=2).exists()
    assert [row["label"] for row in Experiment.objects.get(pk=experiment.pk).result["rows"]] == [
        "start · hiprag"
    ]

    _set(trainer, finished_at="2026-11-27T06:05:00Z", exit_code=0)
    second = experiment_spool_follow(experiment.pk, out)

    assert second.added == ["train-outcome-s0"]
    link = experiment.links.get(role="train", arm="outcome")
    assert link.run_id == running.pk and link.attempts == 1 and link.run.status == Run.Status.FINISHED
    assert (
        Experiment.objects.get(pk=experiment.pk).spec["spool_id"]
        == json.loads((out / "manifest.json").read_text())["id"]
    )


def test_the_command_replaying_a_browser_experiments_spool_finds_it(
    make_spec: Any, index: Index, tmp_path: Path
) -> None:
    experiment = _browser_experiment(make_spec)
    out = make_spool(tmp_path, index)
    assert len(experiment_spool_follow(experiment.pk, out).added) == 6

    call_command("replay_spool", str(out), stdout=StringIO())

    assert Experiment.objects.count() == 1 and experiment.links.count() == 6
    assert "imported_from" not in Experiment.objects.get(pk=experiment.pk).spec
