"""Writes on training runs: creation, stop requests, crash detection, and what the supervisor records."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from trainer.config import RunConfig
from trainer.placement import CONFIG_KEY, Placement
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.runs.models import Run
from webapp.runs.services import run_cancel, run_create, run_mark_finished
from webapp.training.config import run_config, warm_start_values
from webapp.training.models import TrainingProcess

if TYPE_CHECKING:
    from trainer.warm_start import WarmStartConfig

QUESTIONS_FILE = "questions.jsonl"


def run_dir_for(run_id: int) -> Path:
    return Path(settings.TRAINING_RUNS_DIR) / str(run_id)


@transaction.atomic
def training_run_create(
    *,
    user: AbstractBaseUser | None,
    name: str,
    config: RunConfig,
    dataset: Dataset | None = None,
    index: Index | None = None,
    enqueue: bool = True,
    executor: str = Placement.LOCAL.value,
) -> Run:
    """A pending train run whose ``config`` is the trainer's full config, and (``enqueue``) its supervisor task on
    commit; without it the caller supervises the run itself (an experiment does, stage by stage).

    ``config`` is made again here with the run's own folder (and its questions file when a ``dataset`` is given), so
    it is validated by trainer.config exactly as ``python -m trainer.train`` will read it. ``index`` is recorded
    when the config's rollout searches one.
    """
    run = run_create(
        name=name,
        method=config.method,
        model_name=config.model.path,
        kind=Run.Kind.TRAIN,
        algorithm=config.algorithm,
        dataset_id=dataset.pk if dataset else None,
        created_by=user,
    )
    folder = run_dir_for(run.pk)
    searches = config.rollout.factory == "agent"
    run.config = run_config(
        {**config.to_dict(), CONFIG_KEY: executor},
        output_dir=str(folder / "output"),
        data_path=str(folder / QUESTIONS_FILE) if dataset else "",
    ).to_dict()
    run.index = index if searches else None
    run.judge_settings = {"judge": config.rollout.options.get("judge")} if run.index else {}
    run.save(update_fields=["config", "index", "judge_settings"])
    # Its placement (trainer.placement): local, a subprocess of the train worker, or ray, a Ray job
    # (webapp.training.executors); the config says it too.
    TrainingProcess.objects.create(run=run, run_dir=str(folder), executor=executor)
    if enqueue:
        _enqueue(run.pk)
    return run


def _enqueue(run_id: int) -> None:
    from webapp.training.tasks import training_supervise_task

    transaction.on_commit(lambda: training_supervise_task.delay(run_id))


@transaction.atomic
def warm_start_run_create(
    *, user: AbstractBaseUser | None, name: str, config: WarmStartConfig, dataset: Dataset, index: Index
) -> Run:
    """A pending warm-start run (kind ``warm_start``, algorithm ``sft``) and its supervisor task on commit; its
    output folder is a policy the new-run and evaluation forms offer once it has finished."""
    from trainer.warm_start import warm_start_config

    run = run_create(
        name=name,
        method=config.methods[0],
        model_name=config.model.path,
        kind=Run.Kind.WARM_START,
        algorithm=Run.Algorithm.SFT,
        dataset_id=dataset.pk,
        created_by=user,
    )
    folder = run_dir_for(run.pk)
    values = warm_start_values(
        config.to_dict(), output_dir=str(folder / "output"), data_path=str(folder / QUESTIONS_FILE)
    )
    run.config = warm_start_config(values).to_dict()
    run.index = index
    run.save(update_fields=["config", "index"])
    TrainingProcess.objects.create(run=run, run_dir=str(folder))
    _enqueue(run.pk)
    return run


@transaction.atomic
def training_stop_request(*, run_id: int) -> Run:
    """Ask the supervisor to stop the trainer (it signals, waits the grace period, then kills).

    A run still waiting for a worker is cancelled at once; its supervisor will find it cancelled and not start.
    """
    run = Run.objects.select_for_update().get(pk=run_id)
    if not run.is_active:
        return run
    TrainingProcess.objects.filter(run_id=run_id, stop_requested_at__isnull=True).update(
        stop_requested_at=timezone.now()
    )
    if run.status == Run.Status.PENDING:
        return run_cancel(run_id=run_id)
    from webapp.training import reporting

    if reporting.is_reported(run):
        # Its trainer reports over HTTP: the next ingest answer says ``stop`` (a Ray job is stopped through Ray).
        reporting.stop_reported(run)
    return Run.objects.get(pk=run_id)


def training_stop_requested(*, run_id: int) -> bool:
    return TrainingProcess.objects.filter(run_id=run_id, stop_requested_at__isnull=False).exists()


def training_process_started(*, run_id: int, command: Sequence[str], pid: int) -> None:
    TrainingProcess.objects.filter(run_id=run_id).update(
        command=list(command), pid=pid, hostname=socket.gethostname(), supervisor_pid=os.getpid()
    )


def training_heartbeat(
    *, run_id: int, log_tail: str | None = None, progress: Mapping[str, Any] | None = None
) -> None:
    fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
    if log_tail is not None:
        fields["log_tail"] = log_tail
    if progress is not None:
        fields["progress"] = dict(progress)
    Run.objects.filter(pk=run_id).update(**fields)


@transaction.atomic
def training_metrics_store(*, run_id: int, rows: Sequence[Mapping[str, Any]], offset: int) -> int:
    """Upsert metrics.jsonl rows ({"step", "time", "key", "value"}) as the ingest path does
    (:func:`webapp.training.ingest.store_metrics`) and remember how far the file was read."""
    from webapp.training.ingest import store_metrics

    stored = store_metrics(run_id, rows)
    TrainingProcess.objects.filter(run_id=run_id).update(metrics_offset=offset)
    return stored


def training_process_ended(*, run_id: int, exit_code: int, killed: bool, error_tail: str) -> Run:
    """The final status: cancelled after a stop request, finished on exit 0, otherwise failed with the log's end."""
    TrainingProcess.objects.filter(run_id=run_id).update(exit_code=exit_code, killed=killed)
    if training_stop_requested(run_id=run_id):
        return run_mark_finished(run_id=run_id, status=Run.Status.CANCELLED)
    if exit_code == 0:
        return run_mark_finished(run_id=run_id, status=Run.Status.FINISHED)
    return run_mark_finished(
        run_id=run_id,
        status=Run.Status.FAILED,
        error=f"trainer exited with {exit_code}\n{error_tail}".strip(),
    )


def process_alive(pid: int | None) -> bool:
    """Whether a process of this machine exists (its supervisor or trainer; ``kill(pid, 0)`` sends nothing)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def trainer_kill(process: TrainingProcess) -> None:
    """Kill a trainer left behind by a dead supervisor, when it runs on this machine (its whole process group)."""
    if process.hostname == socket.gethostname() and process_alive(process.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # type: ignore[arg-type]  # process_alive: pid is set


def training_mark_crashed(*, run_id: int | None = None, now: dt.datetime | None = None) -> list[int]:
    """Mark running train runs crashed whose heartbeat is older than the timeout and whose supervisor is gone; a run
    whose trainer reports over HTTP (webapp.training.reporting) only after TRAINING_REPORT_QUIET_LIMIT_SECONDS.

    "Gone" is checked by pid on the supervisor's own machine; from another machine the stale heartbeat alone
    decides (the supervisor beats every second, so minutes of silence mean its worker died). A trainer left behind
    by a dead supervisor on this machine is killed, so it cannot keep a GPU busy for nobody.
    """
    now = now or timezone.now()
    cutoff = now - dt.timedelta(seconds=settings.TRAINING_HEARTBEAT_TIMEOUT_SECONDS)
    stale = Run.objects.filter(
        kind__in=Run.SUPERVISED_KINDS, status=Run.Status.RUNNING, heartbeat_at__lt=cutoff
    )
    if run_id is not None:
        stale = stale.filter(pk=run_id)
    here = socket.gethostname()
    crashed: list[int] = []
    from webapp.training import reporting

    quiet_limit = dt.timedelta(seconds=reporting.quiet_limit_seconds())
    for run in stale.select_related("training_process"):
        if reporting.is_reported(run):
            # Its trainer spools and replays what it could not send: silence is "quiet" up to the quiet limit.
            if run.heartbeat_at is not None and now - run.heartbeat_at < quiet_limit:
                continue
            seconds = (
                (now - run.heartbeat_at).total_seconds() if run.heartbeat_at else quiet_limit.total_seconds()
            )
            run_mark_finished(run_id=run.pk, status=Run.Status.CRASHED, error=reporting.quiet_error(seconds))
            crashed.append(run.pk)
            continue
        process = getattr(run, "training_process", None)
        same_host = process is not None and process.hostname == here
        if same_host and process_alive(process.supervisor_pid):
            continue
        if same_host:
            trainer_kill(process)
        seconds = int((now - run.heartbeat_at).total_seconds()) if run.heartbeat_at else 0
        run_mark_finished(
            run_id=run.pk,
            status=Run.Status.CRASHED,
            error=f"no heartbeat for {seconds} s and its supervisor is gone (the train worker died?)",
        )
        crashed.append(run.pk)
    return crashed
