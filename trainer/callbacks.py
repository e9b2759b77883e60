"""The trainer's callbacks: metric points and sample trajectories written as JSON lines for the web app's supervisor to
tail (their rows and keys: :mod:`trainer.metric_rows`), validation every N steps, the heartbeat, and the stops (time
budget, stop file).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from agent.judge_stats import JudgeCostMeter
from trainer.metric_rows import (
    METRICS_FILE,
    PUBLISHED_PREFIX,
    SAMPLES_FILE,
    append_rows,
    path_clashes,
    sample_row,
    score_metrics,
    trl_metrics,
    truncate_after,
    validation_metrics,
)
from trainer.rewards import ScoreLedger

__all__ = [  # the rows' names stay importable from here
    "METRICS_FILE",
    "PUBLISHED_PREFIX",
    "SAMPLES_FILE",
    "MetricsCallback",
    "ProgressCallback",
    "StopFileCallback",
    "TimeBudgetCallback",
    "ValidationCallback",
    "WarmStartCallback",
    "append_rows",
    "path_clashes",
    "sample_row",
    "score_metrics",
    "trl_metrics",
    "truncate_after",
    "validation_metrics",
]


class MetricsCallback(TrainerCallback):
    """Writes metrics.jsonl at every log and samples.jsonl every ``sample_every`` steps (main process only).

    ``pending`` holds metrics measured since the last log by other callbacks (:class:`ValidationCallback`); they
    are written with the next log's. ``judge_cost`` (the agent rollout's :class:`agent.judge_stats.JudgeCostMeter`)
    adds the judge's calls, errors, tokens in and out and seconds since the last log (``judge/*``). With ``publish`` (trackers on), searchlab's metrics are also added to TRL's
    ``logs`` as ``searchlab/<key>``, so the report_to callbacks after this one send the run page's curves to the
    trackers."""

    def __init__(
        self,
        ledger: ScoreLedger,
        output_dir: str,
        *,
        sample_every: int = 10,
        samples_per_log: int = 4,
        publish: bool = False,
        judge_cost: JudgeCostMeter | None = None,
    ):
        self.ledger = ledger
        self.judge_cost = (
            judge_cost  # the rollout's judge calls, tokens and seconds since the last log (judge/*)
        )
        self.metrics_path = Path(output_dir) / METRICS_FILE
        self.samples_path = Path(output_dir) / SAMPLES_FILE
        self.sample_every = sample_every
        self.samples_per_log = samples_per_log
        self.publish = publish
        self.pending: dict[str, float] = {}
        self._last_sampled_step = -1

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if state.is_world_process_zero:
            self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
            truncate_after(self.metrics_path, state.global_step)
            truncate_after(self.samples_path, state.global_step)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not state.is_world_process_zero or logs is None or "train_runtime" in logs:
            return
        step = state.global_step
        now = time.time()
        metrics = {**trl_metrics(logs), **score_metrics(self.ledger.drain_since_log()), **self.pending}
        if self.judge_cost is not None:
            metrics.update(self.judge_cost.take())
        self.pending.clear()
        if self.publish:
            logs.update({PUBLISHED_PREFIX + key: value for key, value in metrics.items()})
            for key in path_clashes(logs):
                del logs[key]
        append_rows(
            self.metrics_path,
            (
                {"step": step, "time": now, "key": key, "value": value}
                for key, value in sorted(metrics.items())
            ),
        )
        due = step == 1 or (self.sample_every > 0 and step % self.sample_every == 0)
        if self.sample_every and due and step != self._last_sampled_step:
            self._last_sampled_step = step
            append_rows(
                self.samples_path, (sample_row(step, s) for s in self.ledger.latest[: self.samples_per_log])
            )


class ValidationCallback(TrainerCallback):
    """``validation.every_steps``: at the end of every N-th step, and of the last, evaluate the held-out questions
    with ``validate(model)`` (main process only) and have the metrics it returns written with that step's log
    (``MetricsCallback.pending``; the step is logged even when ``logging_steps`` would skip it)."""

    def __init__(
        self,
        validate: Callable[[Any], Mapping[str, float]],
        every_steps: int,
        metrics: MetricsCallback,
        progress: Any = None,
    ) -> None:
        self.validate = validate
        self.every_steps = every_steps
        self.metrics = metrics
        self.progress = progress
        self._last_step = -1

    def due(self, state: TrainerState, control: TrainerControl) -> bool:
        step = state.global_step
        last = step >= state.max_steps or control.should_training_stop
        return step != self._last_step and (step % self.every_steps == 0 or last)

    def on_step_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: Any = None,
        **kwargs: Any,
    ) -> None:
        if not state.is_world_process_zero or not self.due(state, control):
            return
        self._last_step = state.global_step
        if self.progress is not None:
            self.progress.update(
                "validate", 0, 0, f"step {state.global_step}: evaluating the held-out questions"
            )
        self.metrics.pending.update(self.validate(model))
        control.should_log = True


class ProgressCallback(TrainerCallback):
    """Step boundaries for the heartbeat (:mod:`trainer.progress`): step k of N, its time, the ETA."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.progress.begin_step(state.global_step + 1, state.max_steps)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.progress.end_step()

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.progress.update("save", state.global_step, state.max_steps, "checkpoint saved")


class TimeBudgetCallback(TrainerCallback):
    """``training.max_seconds``: after the step that ends past the budget, stop as if ``max_steps`` were reached
    (TRL then returns from ``train`` and the trainer saves the model)."""

    def __init__(self, max_seconds: float) -> None:
        self.max_seconds = max_seconds
        self.started = time.monotonic()

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.started = time.monotonic()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if time.monotonic() - self.started >= self.max_seconds:
            control.should_training_stop = True


class StopFileCallback(TrainerCallback):
    """``training.stop_file``: once the file holds a step number N, stop at the end of step N or later."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        try:
            stop_at = int(self.path.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):  # no file yet, or one being written
            return
        if state.global_step >= stop_at:
            control.should_training_stop = True


class WarmStartCallback(TrainerCallback):
    """The warm start's loss curve in ``metrics.jsonl`` (the same rows as :class:`MetricsCallback`) and its
    heartbeat: phase ``train``, batch k of N."""

    KEYS = ("loss", "learning_rate", "grad_norm", "epoch")

    def __init__(self, output_dir: str, progress: Any) -> None:
        self.path = Path(output_dir) / METRICS_FILE
        self.progress = progress

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.progress.begin_step(state.global_step + 1, state.max_steps, "train", "supervised warm start")

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.progress.end_step(next_phase="train")  # the mean batch time, so the warm start's page has an ETA

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        now = time.time()
        rows = [
            {"step": state.global_step, "time": now, "key": key, "value": float(logs[key])}
            for key in self.KEYS
            if logs and isinstance(logs.get(key), int | float) and math.isfinite(float(logs[key]))
        ]
        if rows:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in rows)
