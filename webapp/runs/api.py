"""REST API on runs and their metrics."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_serializer, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.common.pagination import PageNumberPagination
from webapp.runs import selectors
from webapp.runs.models import Run


class RunOutput(serializers.ModelSerializer):
    dataset = serializers.CharField(source="dataset.name", default=None)
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = Run
        fields = (
            "id",
            "name",
            "kind",
            "method",
            "algorithm",
            "model_name",
            "dataset",
            "status",
            "created_by",
            "base_run",
            "created_at",
            "started_at",
            "finished_at",
            "heartbeat_at",
        )


class RunListApi(APIView):
    @extend_schema_serializer(component_name="RunListItem")
    class Output(RunOutput):
        n_trajectories = serializers.IntegerField()

        class Meta(RunOutput.Meta):
            fields = (*RunOutput.Meta.fields, "n_trajectories")

    @extend_schema(responses=Output(many=True), operation_id="runs_list")
    def get(self, request: Request) -> Response:
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(selectors.run_list(), request, view=self)
        return paginator.get_paginated_response(self.Output(page, many=True).data)


class RunDetailApi(APIView):
    @extend_schema_serializer(component_name="Run")
    class Output(RunOutput):
        class Meta(RunOutput.Meta):
            fields = (*RunOutput.Meta.fields, "index", "judge_settings", "config", "log_tail", "error")

    @extend_schema(responses=Output, operation_id="runs_retrieve")
    def get(self, request: Request, run_id: int) -> Response:
        try:
            run = selectors.run_get(run_id=run_id)
        except Run.DoesNotExist:
            return Response({"detail": "No such run."}, status=404)
        return Response(self.Output(run).data)


class RunMetricsApi(APIView):
    """Metric points of a run after ``since_step`` (poll with the last step you saw), optionally of one key."""

    @extend_schema_serializer(component_name="MetricQuery")
    class Input(serializers.Serializer):
        key = serializers.CharField(required=False)
        since_step = serializers.IntegerField(required=False, min_value=-1)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=50_000, default=10_000)

    @extend_schema_serializer(component_name="MetricPoint")
    class Output(serializers.Serializer):
        step = serializers.IntegerField()
        key = serializers.CharField()
        value = serializers.FloatField()
        wall_time = serializers.DateTimeField()

    @extend_schema(
        parameters=[Input],
        responses=inline_serializer(name="MetricPoints", fields={"results": Output(many=True)}),
        operation_id="runs_metrics",
    )
    def get(self, request: Request, run_id: int) -> Response:
        get_object_or_404(Run.objects.only("id"), pk=run_id)
        params = self.Input(data=request.query_params.dict())
        params.is_valid(raise_exception=True)
        limit = params.validated_data.pop("limit")
        points = selectors.metric_points(run_id=run_id, **params.validated_data).values(
            "step", "key", "value", "wall_time"
        )[:limit]
        return Response({"results": self.Output(points, many=True).data})
