"""Training on agent/'s real rollout loops: the same prompts, tags and observations an evaluation run uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.budgets import BUDGET_BY_ROLLOUT_NAME
from tests.agent.conftest import PASSAGES, KeywordSearcher
from tests.trainer.conftest import ConfigFactory
from trainer.agent_rollout import AgentRollout, option_budgets
from trainer.callbacks import METRICS_FILE
from trainer.config import ConfigError
from trainer.train import build_trainer


def keyword_rollout(config: Any, model: Any, tokenizer: Any) -> AgentRollout:
    """A ``module:function`` rollout factory: agent's loop over an in-memory keyword search engine."""
    return AgentRollout(config.method, tokenizer, KeywordSearcher(PASSAGES), config.rollout.options)


def test_it_trains_on_agent_rollouts_with_retrieved_tokens_masked(
    make_config: ConfigFactory, model: Any, tokenizer: Any
) -> None:
    config = make_config(
        method="search_r1",
        rollout={
            "factory": "tests.trainer.test_agent_rollout:keyword_rollout",
            "options": {"max_turns": 1, "max_new_tokens": 12, "max_obs_tokens": 32},
        },
        training={"max_steps": 1},
    )
    trainer = build_trainer(config, model=model, tokenizer=tokenizer)
    seen: list[dict[str, Any]] = []
    original = trainer.rollout_func

    def recording(prompts: list[Any], owner: Any) -> dict[str, Any]:
        columns: dict[str, Any] = original(prompts, owner)
        seen.append(columns)
        return columns

    trainer.rollout_func = recording
    trainer.train()

    assert seen, "the trainer never asked for rollouts"
    columns = seen[0]
    for ids, mask, text in zip(
        columns["completion_ids"], columns["env_mask"], columns["trajectory_text"], strict=True
    ):
        assert len(ids) == len(mask) and 1 in mask
        # every environment span is text the environment wrote (a retrieved passage or the invalid-action notice)
        if 0 in mask:
            assert "<information>" in text or "invalid" in text
    assert any(0 in mask for mask in columns["env_mask"]), "no rollout had an environment span to mask"
    rows = [json.loads(line) for line in (Path(config.output_dir) / METRICS_FILE).read_text().splitlines()]
    assert {"reward/mean", "searches/mean", "loss"} <= {row["key"] for row in rows}


def budgeted_rollout(config: Any, model: Any, tokenizer: Any) -> AgentRollout:
    """The keyword search engine with the config's budgets, as ``rollout.factory = "agent"`` builds it."""
    from trainer.agent_rollout import budgets

    return AgentRollout(
        config.method, tokenizer, KeywordSearcher(PASSAGES), config.rollout.options, budgets=budgets(config)
    )


def test_the_configs_budgets_reach_the_rollout_and_every_phase_reaches_the_heartbeat(
    make_config: ConfigFactory, model: Any, tokenizer: Any
) -> None:
    config = make_config(
        method="search_r1",
        rollout={
            "factory": "tests.trainer.test_agent_rollout:budgeted_rollout",
            "max_turns": 1,
            "max_turn_tokens": 8,
            "max_rollout_tokens": 40,
            "max_obs_tokens": 16,
        },
        training={"max_steps": 2, "max_completion_length": 64},
    )
    trainer = build_trainer(config, model=model, tokenizer=tokenizer)
    seen: list[dict[str, Any]] = []
    original = trainer.rollout_func

    def recording(prompts: list[Any], owner: Any) -> dict[str, Any]:
        columns: dict[str, Any] = original(prompts, owner)
        seen.append(columns)
        return columns

    trainer.rollout_func = recording
    trainer.train()

    ends = set()
    for extras, mask in zip(seen[0]["rollout_extras"], seen[0]["env_mask"], strict=True):
        # A random tiny model never closes a tag: each turn is cut at 8 tokens, and the rollout ends when its 40
        # tokens are spent (the environment's last insertion may overrun them) or its one turn is used.
        ends.add(extras["end"])
        assert sum(mask) <= 40 and extras["cut_turns"] >= 1
    assert ends <= {"budget:turns", "budget:turn_tokens", "budget:rollout_tokens", "eos"}
    heartbeat = json.loads((Path(config.output_dir) / "progress.json").read_text())
    assert (heartbeat["step"], heartbeat["max_steps"], heartbeat["phase"]) == (2, 2, "done")
    assert {"load", "generate", "update"} <= set(heartbeat["phase_seconds"])
    assert heartbeat["mean_step_seconds"] > 0 and heartbeat["eta_seconds"] == 0


def test_the_reask_judge_option_selects_hiprags_own_over_search_test() -> None:
    lexical = AgentRollout("hiprag", None, None, {"judge": "reask"})._judges(None)
    assert (lexical.evidence, lexical.reask, lexical.judge, lexical.regenerator) == (True, True, None, None)
    option = {"reask": "endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 1}
    endpoint = AgentRollout("hiprag", None, None, {"judge": option})._judges(None)
    assert endpoint.reask and endpoint.judge is not None and endpoint.regenerator is endpoint.judge
    policy = AgentRollout("hiprag", None, None, {"judge": {**option, "reask": "policy"}})._judges(None)
    assert (
        policy.judge is not None and policy.regenerator is None
    )  # the policy answers, the endpoint compares


def test_rollouts_sample_at_the_runs_training_temperature(
    make_config: ConfigFactory, monkeypatch: Any
) -> None:
    """TRL recomputes the sampled tokens' log-probs with logits divided by training.temperature: the rollouts must
    be drawn at that temperature too (they were drawn at the paper config's 1.0 whatever the run said)."""
    import trainer.agent_rollout as agent_rollout

    monkeypatch.setattr(agent_rollout, "_searcher", lambda options: KeywordSearcher(PASSAGES))
    config = make_config(
        method="hiprag",
        rollout={"factory": "agent", "options": {"index": "/an/index"}},
        training={"temperature": 0.6},
    )
    assert agent_rollout.build(config, None, None).config.temperature == 0.6
    assert (
        AgentRollout("hiprag", None, None, {}).config.temperature == 1.0
    )  # no run temperature: the paper's, or 1


def test_rollout_options_override_every_declared_budget_under_its_rollout_name() -> None:
    options = {"index": "/an/index", **{name: 2 for name in BUDGET_BY_ROLLOUT_NAME}}
    assert option_budgets(options) == dict.fromkeys(BUDGET_BY_ROLLOUT_NAME, 2)
    config = AgentRollout("search_r1", None, None, options, budgets={"max_turns": 5, "topk": 4}).config
    assert (config.max_turns, config.max_new_tokens, config.max_rollout_tokens, config.topk) == (2, 2, 2, 2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topk": 0}, r"^rollout\.options\.topk: must be ≥ 1, got 0$"),
        ({"max_turns": 51}, r"^rollout\.options\.max_turns: must be ≤ 50, got 51$"),
        ({"max_new_tokens": "64"}, r"^rollout\.options\.max_new_tokens: must be an integer, got '64'$"),
        ({"max_obs_tokens": True}, r"^rollout\.options\.max_obs_tokens: must be an integer, got True$"),
    ],
)
def test_a_budget_option_outside_its_declared_range_is_refused_by_name(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        AgentRollout("search_r1", None, None, options)
