"""POST /api/v1/score: score raw trajectories with a method; large batches become a job to poll.

A request is one batch (``scoring.scorer.score_batch``): HiPRAG Sec. 5.3's batch-average bonus is taken over it. A
trajectory the scorer rejects comes back with ``error: {item, field, message}`` (e.g. ``judgements.step_flags``, "2
verdicts for 1 steps"); invalid shared ``params`` refuse the request with 400, naming the field."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scoring import formats
from webapp.api import services
from webapp.api.models import ScoreJob
from webapp.runs.models import Method


class ScoreApi(APIView):
    @extend_schema_serializer(component_name="ScoreRequest")
    class Input(serializers.Serializer):
        @extend_schema_serializer(component_name="ScoreTrajectory")
        class TrajectoryInput(serializers.Serializer):
            response = serializers.CharField(
                allow_blank=True,
                trim_whitespace=False,
                required=False,
                help_text="the response text (tag formats)",
            )
            messages = serializers.ListField(
                child=serializers.JSONField(),
                required=False,
                help_text="instead of response: a chat trajectory, OpenAI-style messages with tool calls "
                "(docs/chat_trajectories.md); search_r1, hiprag and tiresrag score it, the others refuse it",
            )
            search_tools = serializers.ListField(
                child=serializers.CharField(),
                required=False,
                help_text="chat: the tool names that are search",
            )
            golden_answers = serializers.ListField(
                child=serializers.CharField(allow_blank=True), allow_empty=False
            )
            format = serializers.ChoiceField(
                choices=list(formats.PARSERS),
                required=False,
                help_text="optional; each method scores responses in its own format, of the same name",
            )
            judgements = serializers.DictField(
                required=False, help_text="judge outcomes the caller already has, e.g. {'step_flags': [...]}"
            )

        method = serializers.ChoiceField(choices=Method.values)
        params = serializers.DictField(
            required=False,
            default=dict,
            help_text="the method's weights, shared by the batch. The request's trajectories are one batch: with "
            "HiPRAG's process = over_only / under_only (Sec. 5.3), a trajectory without a step of the evaluated "
            "type gets the batch's average bonus",
        )
        trajectories = TrajectoryInput(many=True, allow_empty=False)

        def validate_trajectories(self, value: list[dict[str, object]]) -> list[dict[str, object]]:
            if len(value) > settings.SCORE_MAX_TRAJECTORIES:
                raise serializers.ValidationError(
                    f"at most {settings.SCORE_MAX_TRAJECTORIES} trajectories a request"
                )
            return value

        def validate(self, data: dict[str, Any]) -> dict[str, Any]:
            chats = {"messages" in item for item in data["trajectories"]}
            if any(("messages" in item) == ("response" in item) for item in data["trajectories"]):
                raise serializers.ValidationError(
                    {"trajectories": "each trajectory needs either response or messages, not both"}
                )
            if len(chats) > 1:  # one batch, one kind (HiPRAG's batch average is over the request)
                raise serializers.ValidationError(
                    {"trajectories": "a request holds responses or chat messages, not both"}
                )
            for item in data["trajectories"]:
                if "messages" in item:
                    continue
                if item.get("format", data["method"]) != data["method"]:
                    raise serializers.ValidationError(
                        {
                            "trajectories": f"method {data['method']} scores responses in format {data['method']}, "
                            f"not {item['format']}"
                        }
                    )
            return data

    @extend_schema_serializer(component_name="ScoreResult")
    class Output(serializers.Serializer):
        method = serializers.CharField()
        results = serializers.ListField(child=serializers.DictField())

    @extend_schema_serializer(component_name="ScoreJobCreated")
    class JobOutput(serializers.Serializer):
        job = serializers.IntegerField(source="pk")
        status = serializers.CharField()
        url = serializers.CharField()

    @extend_schema(
        request=Input,
        responses={
            200: Output,
            202: OpenApiResponse(JobOutput, description="a job was created; poll its url"),
            501: OpenApiResponse(description="scoring.scorer is not available yet"),
        },
        operation_id="score_create",
    )
    def post(self, request: Request) -> Response:
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        method, params, trajectories = (data.validated_data[k] for k in ("method", "params", "trajectories"))
        try:
            services.scorer_function()
        except services.ScoringUnavailable as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_501_NOT_IMPLEMENTED)
        try:
            if len(trajectories) <= settings.SCORE_SYNC_MAX:
                results = services.trajectories_score(method=method, params=params, trajectories=trajectories)
                return Response(self.Output({"method": method, "results": results}).data)
            services.score_params_check(method=method, params=params)
        except services.ScoringParamsError as exc:
            return Response({exc.field: [exc.message]}, status=status.HTTP_400_BAD_REQUEST)
        job = services.score_job_create(
            method=method, params=params, trajectories=trajectories, created_by=request.user
        )
        url = request.build_absolute_uri(reverse("api:score-job", args=[job.pk]))
        job.url = url  # type: ignore[attr-defined]
        return Response(self.JobOutput(job).data, status=status.HTTP_202_ACCEPTED, headers={"Location": url})


class ScoreJobDetailApi(APIView):
    @extend_schema_serializer(component_name="ScoreJob")
    class Output(serializers.ModelSerializer):
        class Meta:
            model = ScoreJob
            fields = (
                "id",
                "method",
                "params",
                "n_trajectories",
                "status",
                "results",
                "error",
                "created_at",
                "finished_at",
            )

    @extend_schema(responses=Output, operation_id="score_jobs_retrieve")
    def get(self, request: Request, job_id: int) -> Response:
        try:
            job = ScoreJob.objects.get(pk=job_id)
        except ScoreJob.DoesNotExist:
            return Response({"detail": "No such job."}, status=404)
        return Response(self.Output(job).data)
