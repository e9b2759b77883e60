from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.config import ConfigError, config_from_dict, describe, load_config

TOML = """
output_dir = "var/runs/demo"
method = "autosearch"
algorithm = "ppo"

[model]
path = "tiny-random"
lora = true

[training]
max_steps = 3
learning_rate = 1e-5

[ppo]
gamma = 0.99
lam = 0.95
"""


def test_it_reads_toml_with_defaults_for_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    config = load_config(path)
    assert (config.method, config.algorithm, config.model.lora) == ("autosearch", "ppo", True)
    assert config.training.max_steps == 3
    assert config.training.num_generations == 4  # default
    assert config.ppo.lam == 0.95


def test_it_round_trips_through_json(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    config = load_config(path)
    again = tmp_path / "run.json"
    again.write_text(json.dumps(config.to_dict()))
    assert load_config(again) == config


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"method": "rag"}, "method"),  # unknown method
        ({"training": {"max_stepz": 3}}, "training.max_stepz"),  # typo: unknown keys are errors
        ({"training": {"learning_rate": "fast"}}, "training.learning_rate"),  # wrong type
        ({"training": {"max_steps": True}}, "training.max_steps"),  # a bool is not an integer
        ({"training": {"learning_rate": -1.0}}, "training.learning_rate"),  # out of range
        ({"training": {"num_generations": 1}}, "training.num_generations"),  # GRPO needs a group
        ({"training": {"per_device_train_batch_size": 6}}, "training.per_device_train_batch_size"),
        ({"ppo": {"lam": 1.5}}, "ppo.lam"),
        ({"reward": {"params": {"step": 3}}}, "reward.params.step"),  # set by the trainer
        ({"algorithm": "ppo", "method": "tiresrag"}, "reward.tiresrag_group_shaping"),  # GRPO-only shaping
        ({"rollout": {"factory": "nope"}}, "rollout.factory"),
        ({"model": []}, "model"),
        ({"training": {"lr_scheduler_type": "warmup"}}, "training.lr_scheduler_type"),
        ({"training": {"questions_per_step": -1}}, "training.questions_per_step"),
        ({"training": {"max_seconds": -1}}, "training.max_seconds"),
        ({"training": {"dynamic_sampling_max_draws": -1}}, "training.dynamic_sampling_max_draws"),
        ({"training": {"dynamic_sampling": "yes"}}, "training.dynamic_sampling"),
        # dynamic sampling picks GRPO groups with spread; PPO's advantages come from the critic
        ({"algorithm": "ppo", "training": {"dynamic_sampling": True}}, "training.dynamic_sampling"),
    ],
)
def test_it_names_the_bad_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as error:
        config_from_dict({"output_dir": "x", **values})
    assert error.value.field == field
    assert str(error.value).startswith(f"{field}: ")


def test_it_requires_output_dir() -> None:
    with pytest.raises(ConfigError, match="output_dir: is required"):
        config_from_dict({})


def test_it_rejects_a_malformed_file(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text("output_dir = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)


def test_it_describes_every_field() -> None:
    text = describe()
    assert "training.learning_rate = 1e-06" in text
    assert "ppo.lam" in text


def test_questions_per_step_sets_the_batch_from_the_group_size() -> None:
    config = config_from_dict(
        {"output_dir": "x", "training": {"questions_per_step": 3, "num_generations": 4}}
    )
    assert config.training.per_device_train_batch_size == 12  # 3 GRPO groups of 4 rollouts a step
    assert (
        config_from_dict({"output_dir": "x"}).training.per_device_train_batch_size == 8
    )  # 0: the batch decides


def test_dynamic_sampling_is_off_unless_asked() -> None:
    training = config_from_dict({"output_dir": "x"}).training
    assert (training.dynamic_sampling, training.dynamic_sampling_max_draws) == (False, 2)
    on = config_from_dict(
        {"output_dir": "x", "training": {"dynamic_sampling": True, "dynamic_sampling_max_draws": 0}}
    ).training
    # 0 rounds: measure the spread, draw none
    assert (on.dynamic_sampling, on.dynamic_sampling_max_draws) == (True, 0)
