"""Fixtures of the training tests: a valid new-run form's data, and a train run ready for its supervisor."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from webapp.runs.models import Run
from webapp.runs.services import run_create
from webapp.training.models import TrainingProcess

FAKE_TRAINER = Path(__file__).with_name("fake_trainer.py")


@pytest.fixture
def form_data() -> dict[str, object]:
    """What the browser posts for a 3-step HiPRAG GRPO run of the tiny model with scripted rollouts."""
    return {
        "name": "hiprag-smoke",
        "method": "hiprag",
        "algorithm": "grpo",
        "model_path": "tiny-random",
        "dataset": "",
        "question_limit": 0,
        "rollout": "scripted",
        "index": "",
        "judge": "none",
        "lambda_f": "0.2",
        "lambda_p": "0.4",
        "reward_params": "",
        "max_steps": 3,
        "learning_rate": "1e-6",
        "num_generations": 2,
        "per_device_train_batch_size": 2,
        "gradient_accumulation_steps": 1,
        "num_iterations": 1,
        "max_completion_length": 256,
        "beta": "0.0",
        "epsilon": "0.2",
        "temperature": "1.0",
        "loss_type": "grpo",
        "seed": 0,
        "critic_learning_rate": "1e-5",
        "gamma": "1.0",
        "lam": "1.0",
        "vf_coef": "1.0",
        "sample_every": 1,
        "samples_per_log": 2,
    }


@pytest.fixture
def make_train_run(tmp_path):
    """A pending train run whose folder is under tmp_path, and the argv of the fake trainer for it."""

    def make(*args: str, dataset_id: int | None = None) -> tuple[Run, list[str]]:
        run = run_create(
            name="fake", method="hiprag", model_name="tiny-random", kind=Run.Kind.TRAIN, algorithm="grpo"
        )
        run_dir = tmp_path / f"run{run.pk}"
        run.config = {"output_dir": str(run_dir / "output"), "rollout": {"factory": "scripted"}}
        run.dataset_id = dataset_id
        run.save()
        TrainingProcess.objects.create(run=run, run_dir=str(run_dir))
        return run, [sys.executable, str(FAKE_TRAINER), str(run_dir / "config.json"), *args]

    return make
