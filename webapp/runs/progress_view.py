"""The trainer's heartbeat (trainer.progress, stored on ``Run.progress``) as the run page's progress line."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ProgressView:
    step: int
    max_steps: int
    phase: str  # a sentence: "generating turn 2 of ≤ 5 (6/8 rollouts active)"
    judge_calls: str  # "12 of 20 judge calls answered", or ""
    step_elapsed: str
    eta: str  # "about 4 min left", or "" before the first step has finished
    percent: int  # of the run's steps, the current one counted by its phase


def duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    if whole < 90:
        return f"{whole} s"
    if whole < 5400:
        return f"{round(whole / 60)} min"
    return f"{whole / 3600:.1f} h"


def _phase(progress: Mapping[str, Any]) -> str:
    phase, done, total = (
        progress.get("phase", ""),
        int(progress.get("done") or 0),
        int(progress.get("total") or 0),
    )
    detail = str(progress.get("detail") or "")
    if phase == "generate":
        text = f"generating turn {done} of ≤ {total}" if total else "generating"
    elif phase == "retrieve":
        text = "retrieving"
    elif phase == "judge":
        text = f"judging: {done} of {total} calls answered" if total else "judging"
        detail = ""
    elif phase == "update":
        text = "updating the policy"
    elif phase == "load":
        text = "loading"
    elif phase == "save":
        text = "saving a checkpoint"
    elif phase == "train":
        text = f"training: batch {done} of {total}" if total else "training"
    elif phase == "done":
        text = "finishing"
    else:
        text = str(phase)
    return f"{text} ({detail})" if detail else text


def progress_view(progress: Mapping[str, Any] | None, now: float | None = None) -> ProgressView | None:
    """``now`` (default: the clock) ages the heartbeat: the trainer writes it when something changes, and a first
    turn can generate for a minute without a change, so "this step" and the ETA move on from the heartbeat's time
    instead of standing still."""
    if not progress or not progress.get("phase"):
        return None
    written = progress.get("time")
    age = 0.0
    if isinstance(written, int | float) and progress.get("phase") != "done":
        age = max(0.0, (time.time() if now is None else now) - float(written))
    step, max_steps = int(progress.get("step") or 0), int(progress.get("max_steps") or 0)
    calls = (progress.get("counters") or {}).get("judge_calls")
    judge_calls = ""
    if isinstance(calls, list) and len(calls) == 2 and calls[1] and progress.get("phase") != "judge":
        judge_calls = f"{calls[0]} of {calls[1]} judge calls answered"
    eta = progress.get("eta_seconds")
    done_steps = max(0, step - 1) if progress.get("phase") != "done" else step
    return ProgressView(
        step=step,
        max_steps=max_steps,
        phase=_phase(progress),
        judge_calls=judge_calls,
        step_elapsed=duration(float(progress.get("step_elapsed") or 0) + age),
        eta=f"about {duration(max(0.0, float(eta) - age))} left" if isinstance(eta, int | float) else "",
        percent=round(100 * done_steps / max_steps) if max_steps else 0,
    )
