"""The local placement of an experiment's runner: a subprocess in a session of its own, its output in runner.log,
stopped with its group; the one a dead worker left (runner.json) stopped before a new one starts. An interrupted
worker stops its runner and leaves the experiment failed, to resume."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from webapp.experiments import runner_follow, services
from webapp.experiments.models import Experiment
from webapp.experiments.runner_launch import RunnerLaunch
from webapp.experiments.runner_placement import RUNNER_FILE, LocalRunner, runner_stop_left


def _launch(tmp_path: Path, *argv: str) -> RunnerLaunch:
    return RunnerLaunch(
        argv=list(argv),
        folder=tmp_path,
        out=tmp_path / "spool",
        work=tmp_path / "work",
        log=tmp_path / "runner.log",
    )


def test_a_local_runner_is_a_session_of_its_own_stopped_with_its_group(tmp_path: Path, settings: Any) -> None:
    # a shell whose child would outlive it if only the shell were killed
    runner = LocalRunner(_launch(tmp_path, "sh", "-c", "echo started; sleep 60 & wait"))
    assert os.getpgid(runner.process.pid) == runner.process.pid != os.getpgid(0)
    assert json.loads((tmp_path / RUNNER_FILE).read_text())["pid"] == runner.process.pid
    time.sleep(0.3)

    runner.stop()

    assert runner.poll() is not None
    assert "started" in (tmp_path / "runner.log").read_text()
    assert _group_alive(runner.process.pid) == []  # nothing of its group is left running


def _group_alive(group: int) -> list[int]:
    """The processes of ``group`` still running (a zombie no init reaps does not count), after up to 5 s."""
    deadline = time.monotonic() + 5
    while True:
        found = subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True).stdout.split()
        alive = [int(p) for p in found if _state(int(p)) not in ("Z", "")]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def test_the_runner_a_dead_worker_left_is_stopped_first(tmp_path: Path) -> None:
    left = subprocess.Popen(["sleep", "60"], start_new_session=True)
    (tmp_path / RUNNER_FILE).write_text(
        json.dumps({"executor": "local", "pid": left.pid, "host": os.uname().nodename})
    )

    runner_stop_left(tmp_path)

    assert left.wait(timeout=10) != 0 and not (tmp_path / RUNNER_FILE).exists()


@pytest.mark.django_db
def test_an_interrupted_worker_stops_its_runner_and_the_experiment_resumes(
    make_spec: Any, fake_stages: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment = services.experiment_create(user=None, spec=make_spec(), enqueue=False)
    stopped: list[bool] = []
    sync = runner_follow.Follower.sync

    def interrupted(self: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl-C or SIGTERM reaching the worker while it follows the runner

    real_follow = runner_follow.runner_follow

    def follow(experiment_id: int, launch: Any, runner: Any, say: Any = None) -> Experiment:
        stop = runner.stop
        runner.stop = lambda: (stopped.append(True), stop())
        return real_follow(experiment_id, launch, runner, say)

    monkeypatch.setattr(runner_follow.Follower, "sync", interrupted)
    monkeypatch.setattr(services, "runner_follow", follow)
    with pytest.raises(KeyboardInterrupt):
        services.experiment_execute(experiment_id=experiment.pk)
    experiment.refresh_from_db()
    assert stopped == [True]
    assert experiment.status == Experiment.Status.FAILED and "interrupted" in experiment.error

    monkeypatch.setattr(runner_follow.Follower, "sync", sync)
    experiment = services.experiment_execute(experiment_id=experiment.pk)
    assert experiment.status == Experiment.Status.FINISHED, experiment.error
    assert experiment.links.count() == 6
