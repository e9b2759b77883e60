"""Judge cost per training step in money: the price the user set (``JudgePrice``) for a run's judge model.

A training run logs its judge's tokens per step (``judge/tokens_in``, ``judge/tokens_out``: ``trainer.callbacks``);
the run page turns them into money with the price read here (``GET /api/v1/runs/<id>/judge-price/``):
``tokens_in · input_per_million / 10⁶ + tokens_out · output_per_million / 10⁶`` per step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.evaluation.models import JudgePrice
from webapp.runs.models import Run


def _endpoint_model(judge: Any) -> str | None:
    if isinstance(judge, Mapping) and judge.get("model"):
        return str(judge["model"])
    return None


def run_judge_model(run: Run) -> str | None:
    """The judge model a run's verdicts were made with, as its settings name it: a training run's endpoint judge
    (``judge_settings`` ``{"judge": {"model": …}}``, else its config's ``rollout.options.judge``), an evaluation's
    ``judge_model`` / ``model``. None for a heuristic or policy judge (no model with a price)."""
    settings = run.judge_settings or {}
    found = _endpoint_model(settings.get("judge"))
    if found is None:
        options = ((run.config or {}).get("rollout") or {}).get("options") or {}
        found = _endpoint_model(options.get("judge") if isinstance(options, Mapping) else None)
    if found is None:
        for key in ("model", "judge_model"):
            if isinstance(settings.get(key), str) and settings[key]:
                return str(settings[key])
    return found


def run_judge_price(run: Run) -> dict[str, Any]:
    """``{"model", "price"}``: the run's judge model and the price set for it (None where none is set)."""
    model = run_judge_model(run)
    price = JudgePrice.objects.filter(model=model).first() if model else None
    return {
        "model": model,
        "price": None
        if price is None
        else {
            "input_per_million": price.input_per_million,
            "output_per_million": price.output_per_million,
            "currency": price.currency,
        },
    }


class _Price(serializers.Serializer):
    input_per_million = serializers.FloatField()
    output_per_million = serializers.FloatField()
    currency = serializers.CharField()


class JudgePriceOutput(serializers.Serializer):
    model = serializers.CharField(
        allow_null=True, help_text="the run's judge model, or null (heuristic judge)"
    )
    price = _Price(allow_null=True, help_text="the price set for it (admin: judge prices), or null")


class RunJudgePriceApi(APIView):
    """The run's judge model and its price per million tokens: the run page's judge cost curve in money."""

    @extend_schema(responses=JudgePriceOutput, operation_id="runs_judge_price")
    def get(self, request: Request, run_id: int) -> Response:
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            return Response({"detail": f"No run {run_id}."}, status=404)
        return Response(JudgePriceOutput(run_judge_price(run)).data)
