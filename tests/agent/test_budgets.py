"""The rollout budgets are declared once (agent.budgets) and every setting made of them reads that declaration."""

from __future__ import annotations

import dataclasses

import pytest

from agent.budgets import (
    BUDGET_NAMES,
    BudgetError,
    RolloutBudgets,
    RolloutOverrides,
    budget_field,
    check_budget,
)
from agent.rollout import PAPER_CONFIGS, RolloutConfig


def test_each_budget_declares_a_default_within_its_range_a_label_and_help() -> None:
    for name in BUDGET_NAMES:
        declared = budget_field(name)
        meta = declared.metadata
        assert meta["help"] and meta["label"], name
        assert meta["low"] <= declared.default, name
        assert meta["high"] is None or declared.default <= meta["high"], name


def test_the_training_section_and_the_warm_start_are_made_of_the_budgets() -> None:
    from trainer.config import BUDGETS, config_field
    from trainer.config import RolloutConfig as TrainingRollout
    from trainer.warm_start import WarmStartConfig

    assert tuple(f"rollout.{name}" for name in BUDGET_NAMES) == BUDGETS
    assert issubclass(TrainingRollout, RolloutBudgets) and issubclass(WarmStartConfig, RolloutBudgets)
    for name in BUDGET_NAMES:
        found, _ = config_field(f"rollout.{name}")
        assert found.metadata["help"] == budget_field(name).metadata["help"]
    # the warm start's own default for the runs' budget: the demo's 512 tokens a rollout
    assert WarmStartConfig(output_dir="out").max_rollout_tokens == 512


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"topk": 0}, "topk", "must be ≥ 1, got 0"),
        ({"max_turns": 51}, "max_turns", "must be ≤ 50, got 51"),
        ({"max_turn_tokens": 0}, "max_turn_tokens", "must be ≥ 1, got 0"),
        ({"max_rollout_tokens": -1}, "max_rollout_tokens", "must be ≥ 0, got -1"),
    ],
)
def test_a_budget_out_of_its_range_is_refused_by_name(
    values: dict[str, int], field: str, message: str
) -> None:
    with pytest.raises(BudgetError) as caught:
        RolloutBudgets(**values).check()
    assert (caught.value.field, caught.value.message) == (field, message)


def test_training_and_warm_start_refuse_a_budget_with_the_declared_message() -> None:
    from trainer.config import ConfigError, config_from_dict
    from trainer.warm_start import warm_start_config

    with pytest.raises(ConfigError, match=r"^rollout\.topk: must be ≤ 50, got 60$"):
        config_from_dict({"output_dir": "out", "rollout": {"topk": 60}})
    base = {"output_dir": "out", "index": "i", "model": {"path": "m"}, "data": {"path": "d"}}
    with pytest.raises(ConfigError, match=r"^max_obs_tokens: must be ≥ 1, got 0$"):
        warm_start_config({**base, "max_obs_tokens": 0})


def test_rollout_values_are_under_the_agent_rollouts_names() -> None:
    values = RolloutBudgets(max_turn_tokens=48).rollout_values()
    assert values["max_new_tokens"] == 48 and "max_turn_tokens" not in values
    assert set(values) <= {f.name for f in dataclasses.fields(RolloutConfig)}


def test_overrides_keep_only_what_was_given_and_apply_it_over_the_paper_settings() -> None:
    stored = {"topk": 2, "max_new_tokens": 48, "seed": 7}
    overrides = RolloutOverrides.from_json(stored)
    assert overrides.to_json() == stored  # what EvaluationSpec.rollout has always stored
    config = overrides.apply(PAPER_CONFIGS["hiprag"])
    assert (config.topk, config.max_new_tokens, config.seed) == (2, 48, 7)
    assert config.max_turns == PAPER_CONFIGS["hiprag"].max_turns  # not given: the paper's
    assert RolloutOverrides.of(RolloutBudgets(), seed=1).to_json()["max_new_tokens"] == 64


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens", "must be ≥ 1, got 0"),
        ({"topk": 99}, "topk", "must be ≤ 50, got 99"),
        ({"temperature": -0.5}, "temperature", "must be ≥ 0, got -0.5"),
    ],
)
def test_an_override_out_of_range_is_refused_by_its_stored_name(
    values: dict[str, float], field: str, message: str
) -> None:
    with pytest.raises(BudgetError) as caught:
        RolloutOverrides.from_json(values).check()
    assert (caught.value.field, caught.value.message) == (field, message)


def test_an_unknown_or_mistyped_override_is_refused() -> None:
    with pytest.raises(BudgetError, match="unknown setting"):
        RolloutOverrides.from_json({"top_k": 3})
    with pytest.raises(BudgetError, match="must be an integer"):
        RolloutOverrides.from_json({"topk": "3"})
    assert check_budget("topk", 50) is None
