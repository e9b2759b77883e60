"""Training on agent/'s real rollout loops: the same prompts, tags and observations an evaluation run uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.agent.conftest import PASSAGES, KeywordSearcher
from tests.trainer.conftest import ConfigFactory
from trainer.agent_rollout import AgentRollout
from trainer.callbacks import METRICS_FILE
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
