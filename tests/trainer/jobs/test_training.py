"""Each arm and seed's trainer config, which trainers a resumed run starts again, and the pool that runs them
``concurrent`` at a time and stops them together by the deadline (with stand-in trainers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainer.jobs import training
from trainer.jobs.plan import parser, plan_from_args
from trainer.jobs.spool import ExperimentSpool, write_json
from trainer.jobs.training import TrainerPool, arm_config, training_jobs


def _plan(tmp_path: Path, *more: str) -> Any:
    rows = [
        {"id": f"q{i}", "question": "q?", "golden_answers": ["x"], "metadata": {"split": s}}
        for i, s in enumerate(("train", "test"))
    ]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "c.jsonl").write_text("")
    argv = [
        "--smoke",
        f"--work={tmp_path / 'w'}",
        f"--out={tmp_path / 'o'}",
        f"--corpus={tmp_path / 'c.jsonl'}",
    ]
    return plan_from_args(parser().parse_args([*argv, f"--questions={tmp_path / 'q.jsonl'}", *more]))


def test_the_arms_of_a_seed_pair_differ_in_their_reward_alone(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "--judge=none")
    paths = (tmp_path / "start", tmp_path / "train.jsonl", tmp_path / "index")
    configs = [arm_config(plan, arm, 3, *paths, tmp_path / arm.name).to_dict() for arm in plan.arms]
    assert [c["reward"]["params"] for c in configs] == [{"lambda_p": 0.0}, {"lambda_p": 0.4}]
    assert {c["training"]["seed"] for c in configs} == {3}
    assert configs[0]["rollout"]["options"] == {"index": str(tmp_path / "index"), "judge": None}
    for config in configs:
        config.pop("reward"), config.pop("output_dir")
    assert configs[0] == configs[1]


def test_a_resumed_run_trains_only_what_has_no_model_or_evaluation(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "--seeds=2")
    spool = ExperimentSpool(tmp_path / "o", {})
    runs = tmp_path / "w" / "runs"
    write_json(
        spool.stage("train-outcome-s0") / "manifest.json", {"format": "searchlab-spool", "exit_code": 0}
    )
    (runs / "train-outcome-s0").mkdir(parents=True)
    (runs / "train-outcome-s0" / "model.safetensors").write_bytes(b"")
    write_json(
        spool.stage("eval-process-s0") / "manifest.json", {"status": "finished"}
    )  # its model may be gone
    write_json(
        spool.stage("train-outcome-s1") / "manifest.json", {"format": "searchlab-spool", "exit_code": 1}
    )
    every, todo = training_jobs(plan, spool, tmp_path / "start", tmp_path / "t.jsonl", tmp_path / "i")
    assert [j.key for j in every] == [
        "train-outcome-s0",
        "train-process-s0",
        "train-outcome-s1",
        "train-process-s1",
    ]
    assert [j.key for j in todo] == ["train-outcome-s1", "train-process-s1"]
    assert todo[0].stop_file == runs / "train-outcome-s1.stop"


# A stand-in trainer: a step a second written to metrics.jsonl until the stop file's step or 30 steps.
FAKE_TRAINER = """
import json, pathlib, sys, time
out, stop = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
for step in range(1, 31):
    time.sleep(float(sys.argv[3]))
    with (out / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": step, "key": "loss", "value": 0.0}) + "\\n")
    if stop.is_file() and step >= int(stop.read_text()):
        break
"""


@pytest.mark.slow
def test_the_pool_runs_n_at_once_and_stops_every_trainer_at_the_same_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(tmp_path, "--seeds=2")
    spool = ExperimentSpool(tmp_path / "o", {})
    every, _ = training_jobs(plan, spool, tmp_path / "start", tmp_path / "t.jsonl", tmp_path / "i")
    running: list[int] = []

    def fake_launch(job: training.TrainerJob, max_seconds: float) -> None:
        speed = "0.3" if job.arm.name == "outcome" else "0.6"
        command = [sys.executable, "-c", FAKE_TRAINER, str(job.output_dir), str(job.stop_file), speed]
        job.process = subprocess.Popen(command)
        running.append(sum(1 for j in every if j.process is not None and j.process.poll() is None))

    monkeypatch.setattr(training, "launch", fake_launch)
    TrainerPool(spool, every[:3], concurrent=2, train_until=spool.log.elapsed() + 3.0, poll_seconds=0.2).run()
    assert max(running) <= 2  # two at once; the third waited, then was not started once time was up
    stopped = [training.steps_done(j.output_dir) for j in every[:2]]
    assert stopped[0] == stopped[1] and 0 < stopped[0] < 30  # both stopped at the same step
    assert every[2].process is None
    log = (tmp_path / "o" / "log.txt").read_text()
    assert f"every run stops at step {stopped[0]}" in log and "train-outcome-s1 not started" in log


@pytest.mark.slow
def test_stopping_the_pool_leaves_no_trainer_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(tmp_path)
    spool = ExperimentSpool(tmp_path / "o", {})
    every, _ = training_jobs(plan, spool, tmp_path / "start", tmp_path / "t.jsonl", tmp_path / "i")

    def fake_launch(job: training.TrainerJob, max_seconds: float) -> None:
        command = [sys.executable, "-c", FAKE_TRAINER, str(job.output_dir), str(job.stop_file), "5"]
        job.process = subprocess.Popen(command)

    monkeypatch.setattr(training, "launch", fake_launch)
    pool = TrainerPool(spool, every, poll_seconds=0.1)
    for job in every:
        training.launch(job, 0.0)
    pool.stop(wait=10)
    assert all(job.process is not None and job.process.poll() is not None for job in every)
