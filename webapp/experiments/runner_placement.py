"""Where an experiment's stage runner runs (the spec's executor, webapp.training.executors' closed set): ``local``, a
subprocess of the worker in a session of its own (its output in the experiment folder's ``runner.log``; stopped with
its group), or ``ray``, a Ray job with the same command (webapp.training.executors.submit_job), its logs copied into
``runner.log`` as it runs. ``runner.json`` in the experiment folder names the runner, so a resume stops the one a dead
worker left before launching again."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

from webapp.experiments.runner_launch import RunnerLaunch
from webapp.training import executors

RUNNER_FILE = "runner.json"
STOP_WAIT_SECONDS = 60.0


class Runner(Protocol):
    where: str  # for the log: "pid 123" or "Ray job searchlab-experiment-4-ab12"

    def poll(self) -> int | None:
        """The exit code once the runner ended, else None."""

    def stop(self) -> None:
        """Stop it (SIGTERM: the runner records its spool failed and stops its trainers) and wait for it."""


class LocalRunner:
    def __init__(self, launch: RunnerLaunch) -> None:
        launch.log.parent.mkdir(parents=True, exist_ok=True)
        with launch.log.open("ab") as log:
            self.process = subprocess.Popen(
                launch.argv,
                cwd=settings.BASE_DIR,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: stopped with its trainers
            )
        self.where = f"pid {self.process.pid}"
        _remember(
            launch, {"executor": executors.LOCAL, "pid": self.process.pid, "host": socket.gethostname()}
        )

    def poll(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        if self.process.poll() is None:
            _stop_group(self.process.pid)
            try:
                self.process.wait(timeout=STOP_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class RayRunner:
    def __init__(self, launch: RunnerLaunch, experiment_id: int) -> None:
        python = getattr(settings, "RAY_PYTHON", "") or launch.argv[0]
        entrypoint = f"cd {shlex.quote(str(settings.BASE_DIR))} && " + shlex.join([python, *launch.argv[1:]])
        self.job_id = executors.submit_job(
            entrypoint=entrypoint,
            runtime_env=executors.job_runtime_env({"RAY_JOB_STOP_SIGNAL": "SIGTERM"}),
            metadata={"searchlab_experiment": str(experiment_id)},
            prefix=f"searchlab-experiment-{experiment_id}",
        )
        self.log = launch.log
        self.where = f"Ray job {self.job_id} on {settings.RAY_ADDRESS}"
        _remember(launch, {"executor": executors.RAY, "job_id": self.job_id})

    def poll(self) -> int | None:
        client = executors.job_client()
        with contextlib.suppress(Exception):  # logs are a courtesy: the status decides
            self.log.write_text(str(client.get_job_logs(self.job_id)), encoding="utf-8")
        info = client.get_job_info(self.job_id)
        status = str(getattr(info.status, "value", info.status))
        if status not in executors.TERMINAL:
            return None
        code = getattr(info, "driver_exit_code", None)
        return int(code) if code is not None else (0 if status == "SUCCEEDED" else 1)

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # gone already, or the cluster is unreachable
            executors.job_client().stop_job(self.job_id)


def runner_start(launch: RunnerLaunch, executor: str, experiment_id: int) -> Runner:
    """Stop the runner a dead worker left for this experiment, then start one where the spec says."""
    runner_stop_left(launch.folder)
    if executor == executors.RAY:
        return RayRunner(launch, experiment_id)
    return LocalRunner(launch)


def runner_stop_left(folder: Path) -> None:
    """The runner ``runner.json`` names, stopped if it still runs (on this machine, or as a Ray job)."""
    path = folder / RUNNER_FILE
    if not path.is_file():
        return
    left: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if left.get("executor") == executors.RAY and left.get("job_id"):
        with contextlib.suppress(Exception):
            executors.job_client().stop_job(left["job_id"])
    elif left.get("pid") and left.get("host") == socket.gethostname():
        _stop_group(int(left["pid"]))
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while time.monotonic() < deadline and _alive(int(left["pid"])):
            time.sleep(0.5)
    path.unlink()


def runner_described(folder: Path) -> str:
    """Where the experiment's runner runs or ran, as its page says it ("" when none was started)."""
    path = folder / RUNNER_FILE
    if not path.is_file():
        return ""
    runner: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if runner.get("executor") == executors.RAY:
        return f"ray · the stage runner, Ray job {runner.get('job_id', '')}"
    return f"local · the stage runner, pid {runner.get('pid', '')} on {runner.get('host', '')}"


def _remember(launch: RunnerLaunch, values: dict[str, Any]) -> None:
    (launch.folder / RUNNER_FILE).write_text(json.dumps(values), encoding="utf-8")


def _stop_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)


def _alive(pid: int) -> bool:
    """The group still has a process that runs (its leader a zombie nobody reaps, on its own, does not count)."""
    try:
        os.killpg(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    with contextlib.suppress(OSError, IndexError):
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return False
    return True
