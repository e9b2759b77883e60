"""The trainer's heartbeat file: phases, counters, time per phase and the ETA."""

from __future__ import annotations

from pathlib import Path

from trainer.progress import JUDGE_CALLS, ProgressReporter, read_progress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_it_adds_up_time_per_phase_and_estimates_the_rest_of_the_run(tmp_path: Path) -> None:
    clock = Clock()
    progress = ProgressReporter(tmp_path, clock=clock)
    progress.begin_step(1, 3)
    clock.now += 30
    progress("retrieve", 1, 1, "8 queries")
    clock.now += 2
    progress("update", 0, 0, "")
    clock.now += 8
    progress.end_step()  # step 1 took 40 s
    snapshot = read_progress(tmp_path)
    assert snapshot is not None
    assert snapshot["phase_seconds"] == {"generate": 30.0, "retrieve": 2.0, "update": 8.0}
    assert (snapshot["step"], snapshot["max_steps"], snapshot["mean_step_seconds"]) == (1, 3, 40.0)
    assert snapshot["eta_seconds"] == 80.0  # two steps to go at 40 s
    progress.begin_step(2, 3)
    clock.now += 10
    assert progress.snapshot()["eta_seconds"] == 70.0  # this step's 10 s are already spent


def test_warm_start_batches_are_steps_with_an_eta(tmp_path: Path) -> None:
    clock = Clock()
    progress = ProgressReporter(tmp_path, clock=clock)
    progress.begin_step(1, 42, "train", "supervised warm start")
    assert (progress.snapshot()["phase"], progress.snapshot()["step"]) == ("train", 1)
    clock.now += 60
    progress.end_step(next_phase="train")
    snapshot = read_progress(tmp_path)
    assert snapshot is not None
    assert (snapshot["phase"], snapshot["mean_step_seconds"], snapshot["eta_seconds"]) == (
        "train",
        60.0,
        2460.0,
    )


def test_judge_calls_are_counted_without_taking_the_phase_from_generation(tmp_path: Path) -> None:
    clock = Clock()
    progress = ProgressReporter(tmp_path, clock=clock)
    progress.begin_step(1, 1)
    progress("generate", 2, 5, "6/8 rollouts active")
    progress(JUDGE_CALLS, 3, 7, "")
    snapshot = progress.snapshot()
    assert (snapshot["phase"], snapshot["done"], snapshot["total"]) == ("generate", 2, 5)
    assert snapshot["counters"] == {"judge_calls": [3, 7]}
    progress("judge", 3, 7, "waiting for judges")
    progress(JUDGE_CALLS, 5, 7, "")
    assert (progress.snapshot()["phase"], progress.snapshot()["done"]) == ("judge", 5)


def test_a_missing_or_torn_heartbeat_reads_as_none(tmp_path: Path) -> None:
    assert read_progress(tmp_path) is None
    (tmp_path / "progress.json").write_text('{"phase": ')
    assert read_progress(tmp_path) is None
