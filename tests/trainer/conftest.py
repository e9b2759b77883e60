"""Fixtures of the trainer tests: a tiny random Llama and a byte-level tokenizer, built offline."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

torch = pytest.importorskip("torch")

from trainer.config import RunConfig, config_from_dict  # noqa: E402
from trainer.models import tiny_model, tiny_tokenizer  # noqa: E402

ConfigFactory = Callable[..., RunConfig]


@pytest.fixture(autouse=True, scope="session")
def _two_threads() -> None:
    torch.set_num_threads(2)  # measured fastest on the 2-core CI box


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    return tiny_tokenizer()


@pytest.fixture
def model(tokenizer: Any) -> Any:
    """A fresh model per test: training changes it."""
    return tiny_model(tokenizer, hidden=32, layers=2, seed=0)


@pytest.fixture
def make_config(tmp_path: Path) -> ConfigFactory:
    """A valid RunConfig for the tiny model; keyword sections override the defaults (``training={...}``)."""

    def make(**sections: Any) -> RunConfig:
        values: dict[str, Any] = {
            "output_dir": str(tmp_path / "run"),
            "method": "hiprag",
            "model": {"path": "tiny-random", "torch_threads": 2},
            "training": {
                "max_steps": 2,
                "learning_rate": 1e-2,
                "per_device_train_batch_size": 4,
                "num_generations": 2,
            },
            "logging": {"sample_every": 1, "samples_per_log": 2},
        }
        for key, value in sections.items():
            if isinstance(value, dict) and isinstance(values.get(key), dict):
                values[key] = {**values[key], **value}
            else:
                values[key] = value
        return config_from_dict(values)

    return make
