"""Every arm trained with every seed: each trainer a subprocess that spools its reports (a run spool per stage).

A trainer is ``python -m trainer.report_client --spool-only --spool DIR/stages/train-<arm>-s<k> --config CONFIG
--output-dir OUT -- python -m trainer.train CONFIG``: its metrics, samples, heartbeat and log become the numbered
batches of a run spool (:mod:`trainer.spool`), which the web app replays as the stage's run. The trainers run all at
once or ``concurrent`` at a time; by the deadline every running trainer stops at the same step (a stop file each,
``training.stop_file``: the next step of the one ahead, which the others catch up to), with half the evaluations'
reserve again as a hard wall-clock limit (``training.max_seconds``) in case one is far behind.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.jobs.arms import Arm
from trainer.jobs.plan import REPO, ExperimentPlan
from trainer.jobs.spool import ExperimentSpool, clear_run_spool, write_json


def arm_config(
    plan: ExperimentPlan, arm: Arm, seed: int, start: Path, train: Path, index: Path, output_dir: Path
) -> Any:
    """The arm's trainer config (``trainer.config.RunConfig``): the web app experiment's (webapp.experiments.
    stage_specs.training_config) with pilot d's knobs, ``--set``'s values laid over them; within a seed pair the
    arms differ in their reward alone."""
    from trainer.config import DEMO_TRAINABLE_LAYERS, config_from_dict, merge

    values = {
        "output_dir": str(output_dir),
        "method": arm.method,
        "algorithm": plan.algorithm,
        "model": {"path": str(start), "trainable_layers": DEMO_TRAINABLE_LAYERS, "torch_threads": 4},
        "data": {"path": str(train)},
        "rollout": {
            "factory": "agent",
            "options": {"index": str(index), "judge": plan.judge.rollout_option()},
            "max_turns": plan.max_turns,
            "max_rollout_tokens": plan.max_rollout_tokens,
        },
        # PPO's advantages come from the critic, so TIRESRAG's GRPO group shaping is off under PPO.
        "reward": {"params": dict(arm.params), "tiresrag_group_shaping": plan.algorithm == "grpo"},
        "training": {
            "max_steps": plan.steps,
            "seed": seed,
            "learning_rate": plan.learning_rate,
            "lr_scheduler_type": "constant",
            "questions_per_step": 1,
            "num_generations": plan.num_generations,
            "temperature": plan.temperature,
            "dynamic_sampling": True,
            "dynamic_sampling_max_draws": 2,
            "max_completion_length": plan.max_rollout_tokens,
        },
        "logging": {"sample_every": 1},
    }
    return config_from_dict(merge(values, plan.trainer_values))


def train_key(arm: str, seed: int) -> str:
    return f"train-{arm}-s{seed}"


@dataclass
class TrainerJob:
    arm: Arm
    seed: int
    config: Any  # trainer.config.RunConfig
    stage: Path  # the run spool
    process: subprocess.Popen[bytes] | None = None
    exit_code: int | None = None

    @property
    def key(self) -> str:
        return train_key(self.arm.name, self.seed)

    @property
    def output_dir(self) -> Path:
        return Path(self.config.output_dir)

    @property
    def stop_file(self) -> Path:
        return Path(self.config.training.stop_file)


def model_saved(output_dir: Path) -> bool:
    return any(output_dir.glob("*.safetensors"))


def steps_done(output_dir: Path) -> int:
    """The last step a run logged in its ``metrics.jsonl`` (0: none yet)."""
    path = output_dir / "metrics.jsonl"
    if not path.is_file():
        return 0
    done = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            done = max(done, int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):  # a line being written
            continue
    return done


def launch(job: TrainerJob, max_seconds: float) -> None:
    """Start the job's trainer under the report client in spool-only mode; its config beside its output folder."""
    if job.output_dir.exists():  # a trainer cut short: it starts again from the start model
        shutil.rmtree(job.output_dir)
    clear_run_spool(job.stage)
    job.stop_file.unlink(missing_ok=True)
    if max_seconds:
        job.config.training.max_seconds = max_seconds
    config_path = job.output_dir.with_suffix(".json")
    write_json(config_path, job.config.to_dict())
    python = sys.executable
    command = [python, "-m", "trainer.report_client", "--spool-only", "--spool", str(job.stage)]
    command += ["--config", str(config_path), "--output-dir", str(job.output_dir)]
    command += ["--name", f"train · {job.arm.name} · seed {job.seed}"]
    command += ["--", python, "-m", "trainer.train", str(config_path)]
    with job.output_dir.with_suffix(".client.log").open(
        "wb"
    ) as client_log:  # the trainer's own log: trainer.log
        # A session of its own: a Ctrl-C reaches the runner alone, which stops each trainer once (TrainerPool.stop)
        job.process = subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=client_log, start_new_session=True
        )


@dataclass
class TrainerPool:
    """The jobs to run, ``concurrent`` at a time (0: all), stopped together by ``train_until`` (seconds of the
    spool's log clock; 0: no deadline) with ``hard_margin`` seconds more as each trainer's wall-clock limit."""

    spool: ExperimentSpool
    jobs: list[TrainerJob]
    concurrent: int = 0
    train_until: float = 0.0
    hard_margin: float = 60.0
    poll_seconds: float = 2.0
    stop_at: int | None = field(default=None, init=False)

    def stop(self, wait: float = 60.0) -> None:
        """The trainers still running told to stop (the report client turns SIGTERM into the trainer's cooperative
        stop: it saves, and its spool's manifest gets the exit code); waited for up to ``wait`` seconds."""
        alive = [j.process for j in self.jobs if j.process is not None and j.process.poll() is None]
        for process in alive:
            process.terminate()
        deadline = time.monotonic() + wait
        for process in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))

    def run(self) -> None:
        waiting = list(self.jobs)
        running: list[TrainerJob] = []
        limit = self.concurrent or len(self.jobs)
        while waiting or running:
            self._check_deadline(running)
            while waiting and len(running) < limit and self.stop_at is None:
                job = waiting.pop(0)
                launch(job, self._max_seconds())
                running.append(job)
                assert job.process is not None
                self.spool.log(
                    f"training {job.key} ({job.arm.method} {job.arm.params}): pid {job.process.pid}"
                )
            if self.stop_at is not None and waiting:
                self.spool.log(f"training: time is up; {', '.join(j.key for j in waiting)} not started")
                waiting.clear()
            for job in list(running):
                assert job.process is not None
                if job.process.poll() is not None:
                    job.exit_code = job.process.returncode
                    running.remove(job)
                    steps = steps_done(job.output_dir)
                    self.spool.log(
                        f"training {job.key}: exit {job.exit_code}, {steps} step{'s' * (steps != 1)}"
                    )
            if running:
                time.sleep(self.poll_seconds)

    def _max_seconds(self) -> float:
        if not self.train_until:
            return 0.0
        return max(1.0, self.train_until - self.spool.log.elapsed() + self.hard_margin)

    def _check_deadline(self, running: list[TrainerJob]) -> None:
        if not self.train_until or self.stop_at is not None or self.spool.log.elapsed() < self.train_until:
            return
        self.stop_at = max((steps_done(j.output_dir) for j in self.jobs), default=0) + 1
        for job in running:
            job.stop_file.write_text(f"{self.stop_at}\n", encoding="utf-8")
        self.spool.log(f"training: time is up, every run stops at step {self.stop_at}")


def training_jobs(
    plan: ExperimentPlan, spool: ExperimentSpool, start: Path, train: Path, index: Path
) -> tuple[list[TrainerJob], list[TrainerJob]]:
    """Every (arm, seed) job, and those still to run: a stage whose trainer exited 0 and left its model is done,
    as is one whose evaluation finished (its model may be gone)."""
    runs = plan.work.resolve() / "runs"
    every, todo = [], []
    for seed in plan.seed_values:
        for arm in plan.arms:
            key = train_key(arm.name, seed)
            config = arm_config(plan, arm, seed, start, train, index, runs / key)
            config.training.stop_file = str(runs / f"{key}.stop")
            job = TrainerJob(arm, seed, config, spool.stage(key))
            every.append(job)
            evaluated = spool.stage_finished(f"eval-{arm.name}-s{seed}")
            if not evaluated and not (spool.stage_finished(key) and model_saved(job.output_dir)):
                todo.append(job)
    return every, todo
