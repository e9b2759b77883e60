"""The judge spec (agent.judge_spec): one table of kinds, from which the specs, forms and commands derive; stored
settings keep loading under their older names; a training run's rollout option round-trips; one builder."""

from __future__ import annotations

import dataclasses

import pytest

from agent.judge_spec import (
    EVALUATE,
    EXPERIMENT,
    KINDS,
    REJUDGE,
    TRAIN,
    JudgeKind,
    JudgeSpec,
    JudgeSpecError,
    build_judges,
    endpoint_kinds,
    form_field,
    judge_from_option,
    judge_spec_check,
    kind_choices,
    kinds_for,
)

ENDPOINT = JudgeSpec(kind="openai", base_url="http://judge:8000/v1", model="judge-m", api_key_env="JUDGE_KEY")


def test_each_use_offers_the_kinds_of_the_one_table() -> None:
    assert kinds_for(EVALUATE) == ("none", "policy", "evidence", "reask", "openai")
    assert kinds_for(EXPERIMENT) == ("none", "policy", "evidence", "openai")
    assert kinds_for(REJUDGE) == ("evidence", "openai")
    assert set(kinds_for(TRAIN)) <= {k.value for k in KINDS}
    assert [value for value, _ in kind_choices(EVALUATE)] == list(kinds_for(EVALUATE))
    assert endpoint_kinds(EXPERIMENT) == ("openai",)


def test_stored_specs_load_under_their_older_names() -> None:
    stored = {"kind": "openai", "base_url": "http://j/v1", "model": "m", "api_key_env": "K", "timeout": 5.0}
    assert JudgeSpec.from_json(stored) == JudgeSpec(
        kind="openai", base_url="http://j/v1", model="m", api_key_env="K", timeout=5.0
    )
    form = {"judge": "endpoint", "judge_base_url": "http://j/v1", "judge_model": "m", "stale": 1}
    assert JudgeSpec.from_json(form) == JudgeSpec(kind="openai", base_url="http://j/v1", model="m")
    assert JudgeSpec.from_json({}, default_kind="evidence").kind == "evidence"  # an experiment's default
    assert JudgeSpec.from_json(ENDPOINT.to_json()) == ENDPOINT


@pytest.mark.parametrize(
    "spec",
    [
        JudgeSpec(),
        JudgeSpec(kind="policy"),
        JudgeSpec(kind="evidence"),
        JudgeSpec(kind="reask"),
        ENDPOINT,
        dataclasses.replace(ENDPOINT, kind="reask", regenerator="endpoint", max_retries=1),
    ],
)
def test_a_training_runs_rollout_option_round_trips(spec: JudgeSpec) -> None:
    option = spec.rollout_option()
    back = JudgeSpec.from_rollout_option(option)
    assert back.rollout_option() == option and back.kind == spec.kind


def test_the_rollout_option_reads_as_it_always_has() -> None:
    assert JudgeSpec().rollout_option() is None
    assert JudgeSpec(kind="evidence", base_url="http://left/over").rollout_option() == "evidence"
    assert ENDPOINT.rollout_option() == {
        "base_url": "http://judge:8000/v1",
        "model": "judge-m",
        "api_key_env": "JUDGE_KEY",
    }


@pytest.mark.parametrize(
    ("spec", "use", "field", "message"),
    [
        (JudgeSpec(kind="gpt"), EVALUATE, "kind", "one of none, policy, evidence, reask, openai"),
        (JudgeSpec(kind="reask"), EXPERIMENT, "kind", "one of none, policy, evidence, openai"),
        (JudgeSpec(kind="openai", model="m"), EVALUATE, "base_url", "needs its base URL"),
        (
            JudgeSpec(kind="openai", base_url="ftp://x", model="m"),
            EVALUATE,
            "base_url",
            "http:// or https://",
        ),
        (JudgeSpec(kind="openai", base_url="http://x"), EVALUATE, "model", "name the model"),
        (
            dataclasses.replace(ENDPOINT, api_key_env="sk-123"),
            EVALUATE,
            "api_key_env",
            "NAME of an environment",
        ),
        (JudgeSpec(kind="evidence", answer_judge=True), EVALUATE, "answer_judge", "needs a judge"),
        (dataclasses.replace(ENDPOINT, temperature=3.0), REJUDGE, "temperature", "from 0.0 to 2.0"),
        (dataclasses.replace(ENDPOINT, max_tokens=0), REJUDGE, "max_tokens", "from 1 to 32768"),
    ],
)
def test_the_check_names_the_field(spec: JudgeSpec, use: str, field: str, message: str) -> None:
    with pytest.raises(JudgeSpecError, match=message) as error:
        judge_spec_check(spec, use)
    assert error.value.field == field


def test_forms_and_commands_name_the_fields_one_way() -> None:
    assert [form_field(n) for n in ("kind", "base_url", "model", "api_key_env")] == [
        "judge",
        "judge_base_url",
        "judge_model",
        "judge_api_key_env",
    ]
    assert judge_from_option("http://j/v1", use=EXPERIMENT, model="m").base_url == "http://j/v1"
    assert judge_from_option("openai", use=EVALUATE, base_url="http://j/v1", model="m").kind == "openai"
    with pytest.raises(JudgeSpecError, match="evidence, openai, or an http"):
        judge_from_option("policy", use=REJUDGE)


def test_one_builder_makes_each_kinds_judges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "test-key")
    assert build_judges(JudgeSpec(), None).judge is None
    evidence = build_judges(JudgeSpec(kind="evidence"), None)
    assert evidence.evidence and not evidence.reask and evidence.judge is None
    reask = build_judges(JudgeSpec(kind="reask"), None)
    assert reask.evidence and reask.reask and reask.judge is None
    endpoint = build_judges(dataclasses.replace(ENDPOINT, answer_judge=True), None)
    assert endpoint.judge is not None and endpoint.judge.model == "judge-m"
    assert endpoint.answer_judge is endpoint.judge
    by_endpoint = build_judges(dataclasses.replace(ENDPOINT, kind="reask", regenerator="endpoint"), None)
    assert by_endpoint.reask and by_endpoint.regenerator is by_endpoint.judge
    assert {kind for kind in JudgeKind} == set(KINDS)
