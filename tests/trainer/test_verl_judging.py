"""trainer.verl_judging.make_judge: veRL's ``reward_kwargs.judge`` built through agent.judge_spec's one builder."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.judge_client import JudgeEndpoint, OpenAIJudge
from agent.judge_spec import JudgeSpecError
from trainer.verl_judging import make_judge

ENDPOINT = {"base_url": "http://127.0.0.1:9/v1", "model": "judge-model"}


@pytest.mark.parametrize("option", [None, "", "none", "evidence"])
def test_no_endpoint_means_no_llm_judge(option: Any) -> None:
    assert make_judge(option) is None


@pytest.mark.parametrize(
    "option",
    [
        {**ENDPOINT, "api_key_env": "JUDGE_KEY", "timeout": 5, "max_retries": 1, "concurrency": 8},
        json.dumps(
            {**ENDPOINT, "api_key_env": "JUDGE_KEY", "timeout": 5, "max_retries": 1, "concurrency": 8}
        ),
    ],
    ids=["mapping", "json"],
)
def test_an_endpoints_fields_give_an_openai_compatible_judge_with_those_settings(
    option: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_KEY", "secret")
    judge = make_judge(option)
    assert isinstance(judge, OpenAIJudge)
    assert judge.endpoint == JudgeEndpoint(
        "http://127.0.0.1:9/v1",
        "judge-model",
        api_key_env="JUDGE_KEY",
        timeout=5,
        max_retries=1,
        concurrency=8,
    )


def test_a_judge_built_by_the_caller_is_used_as_is() -> None:
    judge = OpenAIJudge(JudgeEndpoint(**ENDPOINT))
    assert make_judge(judge) is judge


@pytest.mark.parametrize(
    ("option", "field"),
    [
        ({"base_url": "http://127.0.0.1:9/v1"}, "judge.model"),
        ({"model": "judge-model"}, "judge.base_url"),
        ({**ENDPOINT, "timeout": 0}, "judge.timeout"),
        ({**ENDPOINT, "backoff_base": 1.0}, "judge.backoff_base"),
        ("{base_url: http", "judge"),
        ("policy", "judge.kind"),  # a reward function has no policy to judge with or to re-ask
        ("reask", "judge.kind"),
        ("gpt", "judge.kind"),
    ],
)
def test_a_setting_a_reward_function_cannot_run_with_is_refused_by_name(option: Any, field: str) -> None:
    with pytest.raises(JudgeSpecError) as caught:
        make_judge(option)
    assert caught.value.field == field, caught.value
