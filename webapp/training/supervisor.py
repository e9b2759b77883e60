"""Supervising one training subprocess from a Celery worker on the ``train`` queue.

The trainer runs as ``python -m trainer.train CONFIG`` (or ``accelerate launch -m trainer.train CONFIG`` on GPU
machines) in a process group of its own, so a stop or a crash takes its children (accelerate's ranks, tokenizer
workers) with it and a dead trainer never takes the worker down. Every ~second the supervisor stores the new lines
of metrics.jsonl and samples.jsonl, the heartbeat and the log tail, and checks for a stop request: SIGINT to the
group (a KeyboardInterrupt unwinds the trainer with its files flushed), then SIGKILL after the grace period.

What the trainer wrote is read by :class:`trainer.report_client.OutputTailer` and stored by
:func:`webapp.training.ingest.store_batch` — the same reader a remote trainer's HTTP client runs and the same store
the ingest endpoint calls, so a local run and a Ray job's run take one ingest path. A run whose executor is ``ray``
is submitted as a Ray job instead (:mod:`webapp.training.executors`); the job reports over HTTP and this
supervisor watches it through Ray: status, logs, stop, and a job that ended without being asked to is crashed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings

from trainer.placement import Placement
from trainer.report_client import OutputTailer, tail_text
from webapp.datasets.models import Question
from webapp.runs.models import Run
from webapp.runs.services import RunStateError, run_mark_finished, run_mark_started
from webapp.training import ingest, services
from webapp.training.models import TrainingProcess

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
LOG_FILE = "trainer.log"
METRICS_FILE = "metrics.jsonl"  # trainer.callbacks.METRICS_FILE (not imported: it would import transformers)
SAMPLES_FILE = "samples.jsonl"
ERROR_LINES = 30


def _hear_sigint() -> None:
    """In the trainer's process before it execs: SIGINT back to its default. A worker started as a shell's
    background job has SIGINT ignored, the trainer would inherit that, and a stop sent before the trainer installs
    its own handler (trainer.stop) would be lost. Only async-signal-safe work here (one sigaction)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def trainer_command(config_path: Path, *, kind: str = Run.Kind.TRAIN) -> list[str]:
    if kind == Run.Kind.WARM_START:  # a single-process SFT on the worker's machine
        return [sys.executable, "-m", "trainer.warm_start", str(config_path)]
    if settings.TRAINING_LAUNCHER == "accelerate":
        return [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            *settings.TRAINING_ACCELERATE_ARGS,
            "-m",
            "trainer.train",
            str(config_path),
        ]
    return [sys.executable, "-m", "trainer.train", str(config_path)]


def _export_questions(run: Run, path: Path) -> dict[str, tuple[int, int]]:
    """The run's dataset as FlashRAG JSONL for the trainer; returns external id → (question pk, dataset pk)."""
    if run.dataset_id is None:
        return {}
    ids: dict[str, tuple[int, int]] = {}
    with path.open("w", encoding="utf-8") as handle:
        for q in Question.objects.filter(dataset_id=run.dataset_id).order_by("pk").iterator():
            ids[q.external_id] = (q.pk, q.dataset_id)
            row = {"id": q.external_id, "question": q.text, "golden_answers": q.golden_answers}
            # The whole metadata: the warm start reads supporting_titles and split, judges may read more.
            metadata = {**(q.metadata or {}), **({"data_source": q.data_source} if q.data_source else {})}
            if metadata:
                row["metadata"] = metadata
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return ids


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, sig)


class Supervisor:
    def __init__(
        self,
        run_id: int,
        *,
        command: Sequence[str] | None = None,
        poll_seconds: float | None = None,
        grace_seconds: float | None = None,
    ) -> None:
        self.run = Run.objects.select_related("training_process").get(pk=run_id)
        self.process_row: TrainingProcess = self.run.training_process
        self.run_dir = Path(self.process_row.run_dir)
        self.output_dir = Path(self.run.config["output_dir"])
        self.command = (
            list(command) if command else trainer_command(self.run_dir / CONFIG_FILE, kind=self.run.kind)
        )
        # The supervisor's heartbeat: a file read for a local trainer; two calls to Ray's Jobs API for a Ray job.
        ray_job = self.process_row.executor == Placement.RAY
        default_poll = float(getattr(settings, "RAY_POLL_SECONDS", 2.0)) if ray_job else 1.0
        self.poll_seconds = default_poll if poll_seconds is None else poll_seconds
        self.grace_seconds = settings.TRAINING_STOP_GRACE_SECONDS if grace_seconds is None else grace_seconds
        self.tailer = OutputTailer(
            self.output_dir,
            log_path=self.run_dir / LOG_FILE,
            metrics_offset=self.process_row.metrics_offset,
            samples_offset=self.process_row.samples_offset,
        )

    def run_to_end(self) -> str:
        """Start the trainer, supervise it until it exits, record the outcome; returns the run's final status."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / CONFIG_FILE).write_text(json.dumps(self.run.config, indent=2) + "\n")
        _export_questions(self.run, self.run_dir / services.QUESTIONS_FILE)
        try:
            run_mark_started(run_id=self.run.pk)
        except RunStateError:
            logger.info("run %s was stopped before it started", self.run.pk)
            return Run.objects.get(pk=self.run.pk).status
        if self.process_row.executor == Placement.RAY:
            return self._run_ray_job()
        log_path = self.run_dir / LOG_FILE
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        with log_path.open("ab") as log:
            try:
                process = subprocess.Popen(
                    self.command,
                    cwd=settings.BASE_DIR,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: signals reach every child, not the worker
                    preexec_fn=_hear_sigint,
                )
            except OSError as exc:
                return run_mark_finished(
                    run_id=self.run.pk, status=Run.Status.FAILED, error=f"cannot start the trainer: {exc}"
                ).status
        services.training_process_started(run_id=self.run.pk, command=self.command, pid=process.pid)
        try:
            exit_code, killed = self._watch(process, log_path)
        except BaseException as exc:
            # The supervisor itself failed (database gone, worker shutdown): never leave a trainer unsupervised.
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()
            run_mark_finished(
                run_id=self.run.pk, status=Run.Status.FAILED, error=f"supervisor error: {exc!r}"
            )
            raise
        _signal_group(process.pid, signal.SIGKILL)  # children the trainer left behind
        tail = ingest.log_tail(log_path)
        services.training_heartbeat(run_id=self.run.pk, log_tail=tail)
        error_tail = "\n".join(tail.splitlines()[-ERROR_LINES:])
        return services.training_process_ended(
            run_id=self.run.pk, exit_code=exit_code, killed=killed, error_tail=error_tail
        ).status

    def _watch(self, process: subprocess.Popen[bytes], log_path: Path) -> tuple[int, bool]:
        stop_sent_at: float | None = None
        killed = False
        while True:
            try:
                exit_code: int | None = process.wait(timeout=self.poll_seconds)
            except subprocess.TimeoutExpired:
                exit_code = None
            # After the exit too: whatever the trainer wrote last is stored before the final status.
            self._ingest()
            if exit_code is not None:
                return exit_code, killed
            if stop_sent_at is None:
                if services.training_stop_requested(run_id=self.run.pk):
                    logger.info("run %s: stop requested, SIGINT to group %s", self.run.pk, process.pid)
                    _signal_group(process.pid, signal.SIGINT)
                    stop_sent_at = time.monotonic()
            elif not killed and time.monotonic() - stop_sent_at > self.grace_seconds:
                logger.info("run %s: grace period over, SIGKILL to group %s", self.run.pk, process.pid)
                _signal_group(process.pid, signal.SIGKILL)
                killed = True

    def _ingest(self) -> None:
        """Store what the trainer wrote since the last call (and the heartbeat, progress and log tail)."""
        batch = self.tailer.read()
        ingest.store_batch(run_id=self.run.pk, batch=batch)
        TrainingProcess.objects.filter(run_id=self.run.pk).update(
            metrics_offset=self.tailer.metrics_offset, samples_offset=self.tailer.samples_offset
        )

    def _run_ray_job(self) -> str:
        """Submit the run as a Ray job and watch it until it ends; the job reports its rows over HTTP."""
        from webapp.training import executors

        questions_path = self.run_dir / services.QUESTIONS_FILE
        questions = questions_path.read_text(encoding="utf-8") if questions_path.is_file() else ""
        try:
            client = executors.job_client()
            job_id = executors.submit(
                self.run,
                url=settings.TRAINING_INGEST_URL,
                token=ingest.ingest_token(self.run.pk),
                questions=questions,
            )
        except Exception as exc:  # the cluster is unreachable, or refuses the job
            logger.exception("run %s: Ray job submission failed", self.run.pk)
            return run_mark_finished(
                run_id=self.run.pk, status=Run.Status.FAILED, error=f"cannot submit the Ray job: {exc}"
            ).status
        TrainingProcess.objects.filter(run_id=self.run.pk).update(
            job_id=job_id,
            command=[executors.job_entrypoint(self.run, url=settings.TRAINING_INGEST_URL)],
            hostname=socket.gethostname(),
            supervisor_pid=os.getpid(),
        )
        logger.info("run %s: Ray job %s submitted", self.run.pk, job_id)
        try:
            info = self._watch_ray_job(client, job_id)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                client.stop_job(job_id)
            run_mark_finished(
                run_id=self.run.pk, status=Run.Status.FAILED, error=f"supervisor error: {exc!r}"
            )
            raise
        status = _job_status(info)
        exit_code = getattr(info, "driver_exit_code", None)
        stop_requested = services.training_stop_requested(run_id=self.run.pk)
        TrainingProcess.objects.filter(run_id=self.run.pk).update(exit_code=exit_code)
        final, error = executors.outcome(
            status, stop_requested=stop_requested, exit_code=exit_code, message=str(info.message or "")
        )
        if error and final in (Run.Status.FAILED, Run.Status.CRASHED):
            tail = Run.objects.values_list("log_tail", flat=True).get(pk=self.run.pk) or ""
            error = f"{error}\n" + "\n".join(tail.splitlines()[-ERROR_LINES:])
        logger.info(
            "run %s: Ray job %s ended %s (exit %s): %s", self.run.pk, job_id, status, exit_code, final
        )
        return run_mark_finished(run_id=self.run.pk, status=final, error=error.strip()).status

    def _watch_ray_job(self, client: object, job_id: str) -> object:
        """Poll the job every ``poll_seconds`` (the run's heartbeat): its log tail, a stop request; its final info.

        Ray unreachable for longer than the heartbeat timeout ends the watch with an error."""
        stop_sent = False
        last_tail: str | None = None
        failing_since: float | None = None
        while True:
            try:
                info = client.get_job_info(job_id)  # type: ignore[attr-defined]
                logs = client.get_job_logs(job_id)  # type: ignore[attr-defined]
                failing_since = None
            except Exception:
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > settings.TRAINING_HEARTBEAT_TIMEOUT_SECONDS:
                    raise
                logger.warning("run %s: Ray unreachable, retrying", self.run.pk, exc_info=True)
                time.sleep(self.poll_seconds)
                continue
            tail = tail_text(logs)
            services.training_heartbeat(run_id=self.run.pk, log_tail=tail if tail != last_tail else None)
            last_tail = tail
            if _job_status(info) in ("SUCCEEDED", "FAILED", "STOPPED"):
                return info
            if not stop_sent and services.training_stop_requested(run_id=self.run.pk):
                logger.info("run %s: stop requested, stopping Ray job %s", self.run.pk, job_id)
                client.stop_job(job_id)  # type: ignore[attr-defined]
                stop_sent = True
            time.sleep(self.poll_seconds)


def _job_status(info: object) -> str:
    status = getattr(info, "status", "")
    return str(getattr(status, "value", status))


def supervise(run_id: int, **options: object) -> str:
    """Run the training of ``run_id`` to its end (the train queue's task calls this)."""
    return Supervisor(run_id, **options).run_to_end()  # type: ignore[arg-type]
