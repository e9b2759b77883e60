"""Supervising one training subprocess from a Celery worker on the ``train`` queue.

The trainer runs as ``python -m trainer.train CONFIG`` (or ``accelerate launch -m trainer.train CONFIG`` on GPU
machines) in a process group of its own, so a stop or a crash takes its children (accelerate's ranks, tokenizer
workers) with it and a dead trainer never takes the worker down. Every ~second the supervisor stores the new lines
of metrics.jsonl and samples.jsonl, the heartbeat and the log tail, and checks for a stop request: SIGINT to the
group (a KeyboardInterrupt unwinds the trainer with its files flushed), then SIGKILL after the grace period.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings

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


def _judge_model(run: Run) -> str:
    judge = (run.judge_settings or {}).get("judge")
    if judge == "policy":
        return run.model_name
    if judge == "evidence":
        from scoring.judging.evidence import JUDGE_MODEL

        return JUDGE_MODEL
    if isinstance(judge, dict):
        return str(judge.get("model", "endpoint"))
    return f"{run.config.get('rollout', {}).get('factory', 'scripted')} rollout"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, sig)


class Supervisor:
    def __init__(
        self,
        run_id: int,
        *,
        command: Sequence[str] | None = None,
        poll_seconds: float = 1.0,
        grace_seconds: float | None = None,
    ) -> None:
        self.run = Run.objects.select_related("training_process").get(pk=run_id)
        self.process_row: TrainingProcess = self.run.training_process
        self.run_dir = Path(self.process_row.run_dir)
        self.output_dir = Path(self.run.config["output_dir"])
        self.command = (
            list(command) if command else trainer_command(self.run_dir / CONFIG_FILE, kind=self.run.kind)
        )
        self.poll_seconds = poll_seconds
        self.grace_seconds = settings.TRAINING_STOP_GRACE_SECONDS if grace_seconds is None else grace_seconds
        self.metrics_offset = self.process_row.metrics_offset
        self.samples_offset = self.process_row.samples_offset
        self.questions: dict[str, tuple[int, int]] = {}
        self.judge_model = _judge_model(self.run)
        self._last_tail: str | None = None
        self._last_progress: dict[str, object] | None = None

    def run_to_end(self) -> str:
        """Start the trainer, supervise it until it exits, record the outcome; returns the run's final status."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / CONFIG_FILE).write_text(json.dumps(self.run.config, indent=2) + "\n")
        self.questions = _export_questions(self.run, self.run_dir / services.QUESTIONS_FILE)
        try:
            run_mark_started(run_id=self.run.pk)
        except RunStateError:
            logger.info("run %s was stopped before it started", self.run.pk)
            return Run.objects.get(pk=self.run.pk).status
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
            self._beat(log_path)
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
        rows, offset = ingest.read_new_lines(self.output_dir / METRICS_FILE, self.metrics_offset)
        if offset != self.metrics_offset:
            services.training_metrics_store(run_id=self.run.pk, rows=ingest.metric_rows(rows), offset=offset)
            self.metrics_offset = offset
        rows, offset = ingest.read_new_lines(self.output_dir / SAMPLES_FILE, self.samples_offset)
        if offset != self.samples_offset:
            items = [
                item
                for row in rows
                if (
                    item := ingest.sample_input(
                        row,
                        run_id=self.run.pk,
                        method=self.run.method,
                        judge_model=self.judge_model,
                        questions=self.questions,
                    )
                )
                is not None
            ]
            services.training_samples_store(run_id=self.run.pk, items=items, offset=offset)
            self.samples_offset = offset

    def _beat(self, log_path: Path) -> None:
        tail = ingest.log_tail(log_path)
        changed = tail != self._last_tail
        self._last_tail = tail
        progress = ingest.read_progress(self.output_dir)
        fresh = progress is not None and progress != self._last_progress
        self._last_progress = progress
        services.training_heartbeat(
            run_id=self.run.pk, log_tail=tail if changed else None, progress=progress if fresh else None
        )


def supervise(run_id: int, **options: object) -> str:
    """Run the training of ``run_id`` to its end (the train queue's task calls this)."""
    return Supervisor(run_id, **options).run_to_end()  # type: ignore[arg-type]
