"""REST API on trajectories, steps, verdicts and step rewards."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from typing import Any

import orjson
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer, inline_serializer
from rest_framework import serializers
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.common.importing import DataImportError
from webapp.common.pagination import PageNumberPagination
from webapp.common.renderers import CsvRenderer, JsonlRenderer, OrjsonRenderer
from webapp.runs.models import Run
from webapp.trajectories import selectors, services
from webapp.trajectories.models import JudgeVerdict, Step, Trajectory


class TrajectoryOutput(serializers.ModelSerializer):
    dataset = serializers.CharField(source="dataset.name", default=None)
    question_id = serializers.CharField(source="question.external_id", default=None)
    correct = serializers.BooleanField(source="exact_match", allow_null=True)

    class Meta:
        model = Trajectory
        fields = (
            "id",
            "run",
            "dataset",
            "question_id",
            "question_text",
            "golden_answers",
            "training_step",
            "format",
            "format_ok",
            "format_error",
            "format_error_position",
            "final_answer",
            "correct",
            "exact_match",
            "cover_exact_match",
            "f1",
            "n_steps",
            "n_searches",
            "total_reward",
            "reward_components",
        )


class TrajectoryListApi(APIView):
    @extend_schema_serializer(component_name="TrajectoryFilter")
    class Input(serializers.Serializer):
        run = serializers.IntegerField(required=False, source="run_id")
        dataset = serializers.CharField(required=False, help_text="dataset name")
        correct = serializers.BooleanField(required=False, help_text="exact match against the golden answers")
        n_searches = serializers.IntegerField(required=False, min_value=0)
        min_searches = serializers.IntegerField(required=False, min_value=0)
        max_searches = serializers.IntegerField(required=False, min_value=0)
        training_step = serializers.IntegerField(required=False, min_value=0)

    @extend_schema(
        parameters=[Input], responses=TrajectoryOutput(many=True), operation_id="trajectories_list"
    )
    def get(self, request: Request) -> Response:
        # A plain dict, not the QueryDict: DRF reads a missing boolean of form input as False.
        filters = self.Input(data=request.query_params.dict())
        filters.is_valid(raise_exception=True)
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(
            selectors.trajectory_list(**filters.validated_data), request, view=self
        )
        return paginator.get_paginated_response(TrajectoryOutput(page, many=True).data)


class VerdictOutput(serializers.ModelSerializer):
    judge_version = serializers.CharField(
        source="version.name", allow_null=True, default=None, help_text="the judge version's readable name"
    )

    class Meta:
        model = JudgeVerdict
        fields = (
            "id",
            "detector",
            "outcome",
            "score",
            "judge_model",
            "judge_version",
            "raw_reply",
            "latency_ms",
            "prompt_tokens",
            "completion_tokens",
        )


class TrajectoryDetailApi(APIView):
    @extend_schema_serializer(component_name="TrajectoryDetail")
    class Output(TrajectoryOutput):
        @extend_schema_serializer(component_name="StepDetail")
        class StepOutput(serializers.ModelSerializer):
            verdicts = VerdictOutput(many=True)

            class Meta:
                model = Step
                fields = (
                    "id",
                    "index",
                    "kind",
                    "reasoning",
                    "query",
                    "context",
                    "conclusion",
                    "regenerated_answer",
                    "intermediate_answer",
                    "reward",
                    "verdicts",
                )

        steps = StepOutput(many=True)
        verdicts = VerdictOutput(
            many=True, source="trajectory_verdicts", help_text="trajectory-level verdicts"
        )

        class Meta(TrajectoryOutput.Meta):
            fields = (*TrajectoryOutput.Meta.fields, "raw_text", "answers", "steps", "verdicts")

    @extend_schema(responses=Output, operation_id="trajectories_retrieve")
    def get(self, request: Request, trajectory_id: int) -> Response:
        try:
            trajectory = selectors.trajectory_get(trajectory_id=trajectory_id)
        except Trajectory.DoesNotExist:
            return Response({"detail": "No such trajectory."}, status=404)
        return Response(self.Output(trajectory).data)


class StepRewardPageApi(APIView):
    """A run's step rewards in step-id order, a page at a time: pass the last ``step_id`` you got as ``after``."""

    @extend_schema_serializer(component_name="StepRewardQuery")
    class Input(serializers.Serializer):
        after = serializers.IntegerField(required=False, min_value=0, default=0)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=500)

    @extend_schema_serializer(component_name="StepReward")
    class Output(serializers.Serializer):
        step_id = serializers.IntegerField()
        trajectory_id = serializers.IntegerField()
        step_index = serializers.IntegerField()
        kind = serializers.CharField()
        query = serializers.CharField(allow_null=True)
        reward = serializers.FloatField(allow_null=True)

    PageOutput = inline_serializer(
        name="StepRewardPage",
        fields={"next": serializers.URLField(allow_null=True), "results": Output(many=True)},
    )

    @extend_schema(parameters=[Input], responses=PageOutput, operation_id="runs_step_rewards")
    def get(self, request: Request, run_id: int) -> HttpResponse:
        params = self.Input(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        after, limit = params.validated_data["after"], params.validated_data["limit"]
        # The database writes the page's JSON; only the envelope is made here (no object per row).
        results, last, count = selectors.step_reward_page_json(run_id=run_id, after=after, limit=limit)
        if not count:
            get_object_or_404(Run.objects.only("id"), pk=run_id)  # an empty page of a run, or no such run
        next_url = None
        if count == limit:
            next_url = request.build_absolute_uri(f"{request.path}?after={last}&limit={limit}")
        body = b'{"next":' + orjson.dumps(next_url) + b',"results":' + results + b"}"
        return HttpResponse(body, content_type="application/json")


class _Echo:
    """A file-like object whose ``write`` hands the line back, for csv.writer in a streamed response."""

    def write(self, value: str) -> str:
        return value


def _in_blocks(lines: Iterator[str], size: int = 1000) -> Iterator[str]:
    """Join lines into blocks: one write per thousand rows, not one per row, keeps a large export fast."""
    block: list[str] = []
    for line in lines:
        block.append(line)
        if len(block) == size:
            yield "".join(block)
            block = []
    if block:
        yield "".join(block)


def _finite(rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """A non-finite number (a legacy row's inf or NaN) exported as null / an empty cell, never as ``Infinity``."""
    for row in rows:
        if any(isinstance(v, float) and not math.isfinite(v) for v in row):
            row = tuple(None if isinstance(v, float) and not math.isfinite(v) else v for v in row)
        yield row


def _jsonl(rows: Iterator[tuple[Any, ...]]) -> Iterator[str]:
    columns = selectors.STEP_REWARD_COLUMNS
    return _in_blocks(
        json.dumps(dict(zip(columns, row, strict=True)), ensure_ascii=False, allow_nan=False) + "\n"
        for row in _finite(rows)
    )


def _csv(rows: Iterator[tuple[Any, ...]]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(selectors.STEP_REWARD_COLUMNS)
    yield from _in_blocks(writer.writerow(row) for row in _finite(rows))


class StepRewardExportApi(APIView):
    """Every step reward of a run, streamed as JSON lines or CSV (one row per step, never held in memory)."""

    # Accept headers for the two formats must pass content negotiation; errors are still rendered as JSON.
    renderer_classes = (OrjsonRenderer, JsonlRenderer, CsvRenderer)

    @extend_schema(
        responses={
            (200, "application/jsonl"): OpenApiResponse(OpenApiTypes.STR),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
        },
        operation_id="runs_step_rewards_export",
    )
    def get(self, request: Request, run_id: int, fmt: str) -> StreamingHttpResponse:
        get_object_or_404(Run.objects.only("id"), pk=run_id)
        rows = selectors.step_reward_rows(run_id=run_id)
        if fmt == "csv":
            stream, content_type = _csv(rows), "text/csv; charset=utf-8"
        else:
            stream, content_type = _jsonl(rows), "application/jsonl; charset=utf-8"
        response = StreamingHttpResponse(stream, content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="run-{run_id}-step-rewards.{fmt}"'
        return response


class TrajectoryImportApi(APIView):
    """``POST /api/v1/trajectories/import/``: a JSONL file of trajectories, imported at once, all or nothing — the
    Imports page's lines: tag formats (``response`` + ``format``) or chat trajectories (``messages`` with OpenAI-style
    tool calls). A bad line answers 400 naming the file, line and field, and stores nothing."""

    parser_classes = (MultiPartParser,)

    class Input(serializers.Serializer):
        file = serializers.FileField(help_text="JSONL, one trajectory a line")
        run = serializers.IntegerField(required=False, help_text="run id for lines that name none")
        dataset = serializers.CharField(required=False, help_text="dataset name for lines that name none")

    @extend_schema(
        request={"multipart/form-data": Input},
        responses={
            201: inline_serializer("TrajectoryImported", {"imported": serializers.IntegerField()}),
            400: OpenApiResponse(description="a bad line: file, line, field and detail"),
        },
        operation_id="trajectories_import",
    )
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            count = services.trajectory_import_upload(
                upload=data.validated_data["file"],
                run_id=data.validated_data.get("run"),
                dataset_name=data.validated_data.get("dataset"),
            )
        except DataImportError as exc:
            return Response(
                {"file": exc.file, "line": exc.line, "field": exc.field, "detail": str(exc)}, status=400
            )
        return Response({"imported": count}, status=201)
