"""Where a run's trainer runs: ``local`` (a subprocess of the train worker, today's and the demo's) or ``ray`` (a job
on a Ray cluster, submitted through Ray's Jobs API).

A Ray job's entrypoint is the trainer wrapped by :mod:`trainer.report_client`: the wrapper writes the run's config
from the job's runtime environment, runs ``python -m trainer.train`` (or ``accelerate launch -m trainer.train`` over
the node's GPUs), and reports metrics, samples, heartbeat and log tail to searchlab's ingest endpoint with the
run's own token. searchlab's train worker only watches the job through Ray: its status, its logs, a stop
(``JobSubmissionClient.stop_job``: SIGINT to the job's processes, the trainer's cooperative stop, SIGKILL after
``RAY_JOB_STOP_WAIT_TIME_S``), and a job that ended without searchlab asking is marked crashed.

Nothing here imports ray at module level: a web app without a cluster never loads it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import shlex
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from trainer.placement import HELP, STARTABLE, Placement
from webapp.runs.models import Run

logger = logging.getLogger(__name__)

# The placements a run is started in (trainer.placement: local, ray; external runs are their own trainer's).
LOCAL = Placement.LOCAL.value
RAY = Placement.RAY.value
EXECUTORS = STARTABLE
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
SIGNAL_EXIT = 128  # a wrapper exit status above this is a trainer killed by a signal


def ray_configured() -> bool:
    """A cluster is configured (settings.RAY_ADDRESS): the new-run form then offers the ``ray`` executor."""
    return bool(getattr(settings, "RAY_ADDRESS", ""))


def executor_choices() -> list[tuple[str, str]]:
    """The placements a form offers (trainer.placement's startable ones): ray once a cluster is configured."""
    choices = [(LOCAL, f"local ({HELP[Placement.LOCAL]})")]
    if ray_configured():
        choices.append((RAY, f"ray (a job on {settings.RAY_ADDRESS})"))
    return choices


def job_client() -> Any:
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(settings.RAY_ADDRESS)


def job_run_dir(run: Run) -> str:
    """The run's folder on the cluster's node (``RAY_RUNS_DIR``/<id>; default the web app's own runs folder)."""
    base = getattr(settings, "RAY_RUNS_DIR", "") or settings.TRAINING_RUNS_DIR
    return str(Path(base) / str(run.pk))


def job_config(run: Run) -> dict[str, Any]:
    """The run's config as the job reads it: its folders on the node, the retriever and judge as services by URL."""
    config = json.loads(json.dumps(run.config))
    folder = job_run_dir(run)
    config["output_dir"] = f"{folder}/output"
    if (config.get("data") or {}).get("path"):
        config["data"]["path"] = f"{folder}/questions.jsonl"
    options = (config.get("rollout") or {}).get("options") or {}
    retrieve_url = getattr(settings, "RAY_RETRIEVE_URL", "")
    if retrieve_url and options.get("index"):
        # A retriever per node (python -m retrieval.server): the job never opens the web app's index folder.
        options.pop("index")
        options["retrieve_url"] = retrieve_url
    return config


def job_entrypoint(run: Run, *, url: str) -> str:
    """The shell command of the job: the report wrapper around the trainer."""
    python = getattr(settings, "RAY_PYTHON", "") or sys.executable
    folder = job_run_dir(run)
    config_path = f"{folder}/config.json"
    entry = [python, "-m", "trainer.train", config_path]
    if run.kind == Run.Kind.WARM_START:
        entry = [python, "-m", "trainer.warm_start", config_path]
    elif getattr(settings, "RAY_ACCELERATE_ARGS", None):
        entry = [
            python,
            "-m",
            "accelerate.commands.launch",
            *settings.RAY_ACCELERATE_ARGS,
            "-m",
            "trainer.train",
        ]
        entry.append(config_path)
    wrapper = [
        python,
        "-m",
        "trainer.report_client",
        "--url",
        url,
        "--run-id",
        str(run.pk),
        "--run-dir",
        folder,
        "--output-dir",
        f"{folder}/output",
        "--files-from-env",
        "--interval",
        str(getattr(settings, "RAY_REPORT_INTERVAL_SECONDS", 1.0)),
        "--",
        *entry,
    ]
    return f"cd {shlex.quote(str(settings.BASE_DIR))} && " + shlex.join(wrapper)


def runtime_env(run: Run, *, token: str, questions: str) -> dict[str, Any]:
    """The job's runtime environment: the run's config and questions, its ingest token, and Ray's stop settings."""
    env_vars = {
        "SEARCHLAB_RUN_CONFIG": json.dumps(job_config(run), indent=2),
        "SEARCHLAB_RUN_TOKEN": token,
        # Ray signals every process of the job: SIGINT is the trainer's cooperative stop (trainer.stop), and
        # the wrapper must not send it a second one.
        "RAY_JOB_STOP_SIGNAL": "SIGINT",
        "SEARCHLAB_STOP_REACHES_CHILD": "1",
    }
    if questions:
        env_vars["SEARCHLAB_RUN_QUESTIONS"] = questions
    return job_runtime_env(env_vars)


def job_runtime_env(env_vars: Mapping[str, str]) -> dict[str, Any]:
    """A searchlab job's runtime environment: the repository on the path, offline and unbuffered, Ray's stop wait,
    ``env_vars`` (the job's own), and settings.RAY_RUNTIME_ENV laid over them."""
    merged = {
        "PYTHONPATH": str(settings.BASE_DIR),
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_JOB_STOP_WAIT_TIME_S": str(settings.TRAINING_STOP_GRACE_SECONDS + 30),
        **env_vars,
    }
    env: dict[str, Any] = {"env_vars": merged}
    extra = getattr(settings, "RAY_RUNTIME_ENV", None)
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            if key == "env_vars":
                merged.update(value)
            else:
                env[key] = value
    return env


def submit(run: Run, *, url: str, token: str, questions: str) -> str:
    """Submit the run as a Ray job; its submission id (``searchlab-run-<id>-<n>``)."""
    return submit_job(
        entrypoint=job_entrypoint(run, url=url),
        runtime_env=runtime_env(run, token=token, questions=questions),
        metadata={"searchlab_run": str(run.pk), "name": run.name[:100]},
        prefix=f"searchlab-run-{run.pk}",
    )


def submit_job(*, entrypoint: str, runtime_env: dict[str, Any], metadata: dict[str, str], prefix: str) -> str:
    """Submit a searchlab job (a train run's, or an experiment's stage runner) with the entrypoint's GPUs and
    resources of the settings; its submission id (``<prefix>-<n>``)."""
    client = job_client()
    entrypoint_resources = getattr(settings, "RAY_ENTRYPOINT_RESOURCES", None) or {}
    kwargs: dict[str, Any] = {"entrypoint": entrypoint, "runtime_env": runtime_env, "metadata": metadata}
    gpus = getattr(settings, "RAY_ENTRYPOINT_NUM_GPUS", 0)
    if gpus:
        kwargs["entrypoint_num_gpus"] = gpus
    if entrypoint_resources:
        kwargs["entrypoint_resources"] = dict(entrypoint_resources)
    import uuid

    return str(client.submit_job(submission_id=f"{prefix}-{uuid.uuid4().hex[:8]}", **kwargs))


def outcome(status: str, *, stop_requested: bool, exit_code: int | None, message: str) -> tuple[str, str]:
    """A finished job's run status and error: cancelled after our stop; finished on success; failed when the trainer
    exited with an error of its own; crashed when the job was stopped or killed without searchlab asking."""
    if stop_requested:
        return Run.Status.CANCELLED, ""
    if status == "SUCCEEDED":
        return Run.Status.FINISHED, ""
    if status == "STOPPED":
        return Run.Status.CRASHED, "the Ray job was stopped from outside searchlab"
    if exit_code is not None and 0 < exit_code < SIGNAL_EXIT:
        return Run.Status.FAILED, f"trainer exited with {exit_code}"
    return Run.Status.CRASHED, f"the Ray job died: {message or 'no exit status'}".strip()


def reconcile(*, now: dt.datetime | None = None) -> list[int]:
    """The end of Ray runs nobody watches any more, read from Ray (Celery beat, before the crash check).

    A train worker that dies leaves its Ray job running and reporting over HTTP; when the job ends, its run would
    otherwise wait for the heartbeat timeout and be marked crashed even if it succeeded. A running ``ray`` run whose
    supervisor is gone (its pid on this machine, or a heartbeat older than the timeout elsewhere) gets the job's
    final state as a supervisor would have recorded it; a job still running is left alone.
    """
    if not ray_configured():
        return []
    from webapp.runs.services import run_mark_finished
    from webapp.training.models import TrainingProcess
    from webapp.training.services import process_alive

    now = now or timezone.now()
    cutoff = now - dt.timedelta(seconds=settings.TRAINING_HEARTBEAT_TIMEOUT_SECONDS)
    here = socket.gethostname()
    ended: list[int] = []
    client: Any = None
    rows = TrainingProcess.objects.filter(executor=RAY, run__status=Run.Status.RUNNING).exclude(job_id="")
    for row in rows.select_related("run"):
        watched = (
            process_alive(row.supervisor_pid)
            if row.hostname == here
            else (row.run.heartbeat_at is not None and row.run.heartbeat_at >= cutoff)
        )
        if watched:
            continue
        try:
            client = client or job_client()
            info = client.get_job_info(row.job_id)
        except Exception:  # the cluster is unreachable: the heartbeat timeout decides later
            logger.warning("run %s: cannot read Ray job %s", row.run_id, row.job_id, exc_info=True)
            continue
        status = str(getattr(info.status, "value", info.status))
        if status not in TERMINAL:
            continue
        exit_code = getattr(info, "driver_exit_code", None)
        stop_requested = row.stop_requested_at is not None
        final, error = outcome(
            status, stop_requested=stop_requested, exit_code=exit_code, message=str(info.message or "")
        )
        TrainingProcess.objects.filter(pk=row.pk).update(exit_code=exit_code)
        run_mark_finished(run_id=row.run_id, status=final, error=error)
        ended.append(row.run_id)
    return ended
