"""Where a trained run's time went, step by step (``timing.csv``), and how many trainers fit on the GPU at once.

The trainer's metrics carry one time per step (``step_time``: the optimizer step, generation included); its
heartbeat (``progress.json``, :mod:`trainer.progress`) carries the seconds spent in each phase so far (load,
generate, retrieve, judge, update, save), which the report client spools in its batches. ``timing.csv`` has a row
per step: the step's wall time from the metrics, and each phase's seconds as the difference of the last heartbeat
of that step and of the step before — exact to the report client's interval (1 s), since a heartbeat is read
once per interval.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

from trainer import spool as run_spool
from trainer.jobs.spool import write_text

PHASES = ("load", "generate", "retrieve", "judge", "update", "save")
GIB = 1024**3


def step_times(output_dir: Path) -> dict[int, float]:
    """``step_time`` per step from the trainer's ``metrics.jsonl``."""
    found: dict[int, float] = {}
    path = output_dir / "metrics.jsonl"
    if not path.is_file():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            if row["key"] == "step_time":
                found[int(row["step"])] = float(row["value"])
        except (ValueError, KeyError, TypeError):
            continue
    return found


def phase_totals_by_step(stage: Path) -> dict[int, dict[str, float]]:
    """The last heartbeat's cumulative ``phase_seconds`` of each step, from the run spool's batches."""
    totals: dict[int, dict[str, float]] = {}
    for _, batch in run_spool.read_batches(stage):
        progress: Any = batch.get("progress")
        if isinstance(progress, dict) and isinstance(progress.get("phase_seconds"), dict):
            totals[int(progress.get("step") or 0)] = {
                k: float(v) for k, v in progress["phase_seconds"].items()
            }
    return totals


def write_timing(stage: Path, output_dir: Path) -> int:
    """``stage/timing.csv`` (step, step_seconds, then seconds per phase); the rows written."""
    times = step_times(output_dir)
    totals = phase_totals_by_step(stage)
    steps = sorted(set(times) | {s for s in totals if s > 0})
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["step", "step_seconds", *(f"{p}_seconds" for p in PHASES)])
    previous: dict[str, float] = totals.get(0, {})
    for step in steps:
        current = totals.get(step)
        if current is None:
            phases = [""] * len(PHASES)
        else:
            phases = [f"{max(0.0, current.get(p, 0.0) - previous.get(p, 0.0)):.2f}" for p in PHASES]
            previous = current
        wall = times.get(step)
        writer.writerow([step, "" if wall is None else f"{wall:.2f}", *phases])
    write_text(stage / "timing.csv", buffer.getvalue())
    return len(steps)


def model_bytes(model: Path) -> int:
    """The model's weights on disk (safetensors or bin files)."""
    files = [*model.glob("*.safetensors"), *model.glob("*.bin")]
    return sum(f.stat().st_size for f in files)


def estimated_gib(model: Path) -> float:
    """A trainer's GPU memory, estimated: the weights held in float32 with their gradients and AdamW's two moments
    (16 bytes a parameter), half as much again for activations and the rollouts' caches, and 1.5 GiB of CUDA
    context and allocator slack."""
    config: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):  # no config: float32 assumed
        config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    width = {"float32": 4, "float16": 2, "bfloat16": 2}.get(str(config.get("torch_dtype")), 4)
    parameters = model_bytes(model) / width
    return parameters * 16 * 1.5 / GIB + 1.5


def fitting_concurrency(requested: int, per_run_gib: float, free_bytes: int) -> int:
    """How many trainers of ``per_run_gib`` fit in 90% of ``free_bytes`` (at least 1, at most ``requested``)."""
    fit = int(free_bytes * 0.9 // (per_run_gib * GIB)) if per_run_gib > 0 else requested
    return max(1, min(requested, fit))


def gpu_concurrency(
    requested: int, per_run_gib: float, model: Path, log: Any, *, evaluating: bool = False
) -> int:
    """On CUDA, ``requested`` lowered to what fits in the free memory (logged), less one trainer's share for the
    start model's evaluation when it runs beside them (``evaluating``); on a CPU, ``requested``."""
    import torch

    if not torch.cuda.is_available():
        return requested
    free, total = torch.cuda.mem_get_info()
    need = per_run_gib or estimated_gib(model)
    left = max(0, free - int(need * GIB)) if evaluating else free
    fits = fitting_concurrency(requested, need, left)
    log(
        f"GPU memory: {free / GIB:.1f} of {total / GIB:.1f} GiB free, {need:.1f} GiB a trainer"
        f"{' (estimated from the model)' if not per_run_gib else ''}"
        f"{', one share kept for the start evaluation' if evaluating else ''}: {fits} of {requested} at once"
    )
    return fits
