"""The trainer's heartbeat: which phase it is in, with counts and an ETA, in ``<output_dir>/progress.json``.

A training step of a search agent is minutes of work on a CPU (generate turn k of n, retrieve, judge m of M calls,
update the policy), and a log of library warnings says nothing of it. The rollout, the judges and a trainer
callback call :meth:`ProgressReporter.update`; the web app's supervisor reads the file with the metrics and shows
it on the run page. The file is replaced atomically (write + rename), at most every ``min_interval`` seconds
unless the phase changes, so a reader never sees half a file and a busy phase costs no disk traffic.

Phase time is also added up per phase (``phase_seconds``): the benchmark prints it, and it shows where a step's
time goes. Generation and judging overlap (HiPRAG Appendix I), so ``judge`` counts only the time in which the
trainer waited for judges after its rollouts had finished — the part that lengthens a step.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

PROGRESS_FILE = "progress.json"
PHASES = ("load", "generate", "retrieve", "judge", "update", "save", "done")
JUDGE_CALLS = "judge calls"  # agent.evaluate's counter name (see ProgressReporter.__call__)


class ProgressReporter:
    def __init__(self, output_dir: str | Path, *, min_interval: float = 0.5, clock: Any = time.time) -> None:
        self.path = Path(output_dir) / PROGRESS_FILE
        self.min_interval = min_interval
        self.clock = clock
        self.step = 0
        self.max_steps = 0
        self.step_started: float | None = None
        self.step_seconds: list[float] = []
        self.phase = ""
        self.phase_started = clock()
        self.phase_seconds: dict[str, float] = {}
        self.state: dict[str, Any] = {}
        self.counters: dict[str, list[int]] = {}
        # Said before every detail while set: what the phases reported meanwhile are part of (dynamic sampling's
        # "drawing 2 replacement groups": its turns and retrievals are not the step's first rollouts).
        self.note = ""
        self._written = 0.0

    # --- what callers report ----------------------------------------------------------------------------------

    def begin_step(
        self, step: int, max_steps: int, phase: str = "generate", detail: str = "starting rollouts"
    ) -> None:
        """A new optimizer step (1-based) starts: by default its rollouts are generated next (the warm start's
        steps are ``train`` batches)."""
        self.step, self.max_steps = step, max_steps
        self.step_started = self.clock()
        self.update(phase, 0, 0, detail)

    def end_step(self, next_phase: str = "generate") -> None:
        """The step finished: its time feeds the mean step time and so the ETA."""
        if self.step_started is not None:
            self.step_seconds.append(self.clock() - self.step_started)
        self.step_started = None
        self.update("done" if self.step >= self.max_steps else next_phase, 0, 0, "step finished", force=True)

    def update(
        self, phase: str, done: int = 0, total: int = 0, detail: str = "", *, force: bool = False
    ) -> None:
        now = self.clock()
        changed = phase != self.phase
        if changed:
            if self.phase:
                self.phase_seconds[self.phase] = (
                    self.phase_seconds.get(self.phase, 0.0) + now - self.phase_started
                )
            self.phase, self.phase_started = phase, now
        if self.note:
            detail = f"{self.note}: {detail}" if detail else self.note
        self.state = {"phase": phase, "done": done, "total": total, "detail": detail}
        if changed or force or now - self._written >= self.min_interval:
            self._write(now)

    def __call__(self, phase: str, done: int, total: int, detail: str) -> None:
        """The :data:`agent.rollout.Progress` signature, so the reporter can be handed to agent/ directly.

        ``judge calls`` is a counter, not a phase: judge calls run while other rollouts still generate, so they
        are counted (answered of made) without taking the phase from generation; once the trainer waits for
        them only, the phase is ``judge`` and shows the same counts."""
        if phase == JUDGE_CALLS:
            self.counters["judge_calls"] = [done, total]
            if self.phase == "judge":
                self.update("judge", done, total, detail)
            return
        self.update(phase, done, total, detail)

    # --- what readers get -------------------------------------------------------------------------------------

    def totals(self) -> dict[str, float]:
        """Seconds per phase so far, the current phase included."""
        totals = dict(self.phase_seconds)
        if self.phase:
            totals[self.phase] = totals.get(self.phase, 0.0) + self.clock() - self.phase_started
        return totals

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        now = self.clock() if now is None else now
        mean = sum(self.step_seconds) / len(self.step_seconds) if self.step_seconds else None
        in_step = now - self.step_started if self.step_started is not None else 0.0
        eta = None
        if mean is not None and self.max_steps:
            # The steps still to run at the mean step time, less what the current step has already taken.
            eta = max(
                0.0,
                (self.max_steps - self.step + (1 if self.step_started is not None else 0)) * mean - in_step,
            )
        return {
            **self.state,
            "step": self.step,
            "max_steps": self.max_steps,
            "step_elapsed": round(in_step, 1),
            "mean_step_seconds": None if mean is None else round(mean, 1),
            "eta_seconds": None if eta is None else round(eta, 1),
            "phase_seconds": {k: round(v, 2) for k, v in self.totals().items()},
            "counters": dict(self.counters),
            "time": now,
        }

    def _write(self, now: float) -> None:
        self._written = now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".json.tmp")
        partial.write_text(json.dumps(self.snapshot(now)), encoding="utf-8")
        os.replace(partial, self.path)


def read_progress(output_dir: str | Path) -> dict[str, Any] | None:
    """The newest heartbeat of a run, or ``None`` when there is none (or it is being replaced)."""
    try:
        value = json.loads((Path(output_dir) / PROGRESS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
