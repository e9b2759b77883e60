"""The trainer config checks the agent rollout's judge (``rollout.options.judge``) by agent.judge_spec's table and
check, as the forms and commands do."""

from __future__ import annotations

import pytest

from trainer.config import ConfigError, config_from_dict


def test_the_trainer_config_checks_the_agent_rollouts_judge() -> None:
    base = {"output_dir": "out", "rollout": {"factory": "agent", "options": {"index": "idx"}}}
    for judge in ("evidence", "reask", "policy", {"base_url": "http://j/v1", "model": "m"}):
        config_from_dict({**base, "rollout": {"options": {"index": "idx", "judge": judge}}})
    for judge, message in (
        ("gpt", "one of none, policy, evidence, reask, openai"),
        ({"model": "m"}, "base_url: an OpenAI-compatible judge needs its base URL"),
        ({"base_url": "http://j/v1", "model": "m", "api_key_env": "sk-1"}, "api_key_env: the NAME"),
    ):
        with pytest.raises(ConfigError, match=message) as error:
            config_from_dict({**base, "rollout": {"options": {"index": "idx", "judge": judge}}})
        assert error.value.field == "rollout.options.judge"
