"""The run page's judge cost in money: the price set for a run's judge model, by API."""

from __future__ import annotations

from typing import Any

import pytest

from tests.webapp.factories import RunFactory
from webapp.evaluation.judge_cost import run_judge_model
from webapp.evaluation.models import JudgePrice

pytestmark = pytest.mark.django_db


def test_a_training_runs_endpoint_judge_has_the_price_the_admin_set(api_client: Any) -> None:
    JudgePrice.objects.create(
        model="gpt-4.1-mini", input_per_million=0.4, output_per_million=1.6, currency="EUR"
    )
    run = RunFactory(
        kind="train",
        algorithm="grpo",
        judge_settings={"judge": {"base_url": "http://x/v1", "model": "gpt-4.1-mini"}},
    )
    body = api_client.get(f"/api/v1/runs/{run.pk}/judge-price/").json()
    assert body == {
        "model": "gpt-4.1-mini",
        "price": {"input_per_million": 0.4, "output_per_million": 1.6, "currency": "EUR"},
    }


def test_without_a_price_or_an_llm_judge_there_is_no_money(api_client: Any) -> None:
    priced_elsewhere = RunFactory(
        kind="train", algorithm="grpo", config={"rollout": {"options": {"judge": {"model": "m-unpriced"}}}}
    )
    assert api_client.get(f"/api/v1/runs/{priced_elsewhere.pk}/judge-price/").json() == {
        "model": "m-unpriced",
        "price": None,
    }
    heuristic = RunFactory(kind="train", algorithm="grpo", judge_settings={"judge": "evidence"})
    assert run_judge_model(heuristic) is None
    assert api_client.get(f"/api/v1/runs/{heuristic.pk}/judge-price/").json() == {
        "model": None,
        "price": None,
    }
    assert api_client.get("/api/v1/runs/999999/judge-price/").status_code == 404


def test_an_evaluations_judge_model_is_read_from_its_judge_settings() -> None:
    run = RunFactory(judge_settings={"kind": "openai", "base_url": "http://x/v1", "model": "qwen-judge"})
    assert run_judge_model(run) == "qwen-judge"


def test_the_price_endpoint_is_in_the_openapi_schema(api_client: Any) -> None:
    schema = api_client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    assert "get" in schema["paths"]["/api/v1/runs/{run_id}/judge-price/"]
