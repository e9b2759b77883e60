"""The ingest endpoint trainers report to (trainer.report_client), and the run-scoped token a researcher hands them."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainer.placement import CONFIG_KEY, Placement
from webapp.runs.models import Method, Run
from webapp.training import ingest, reporting

MAX_ROWS = 5000  # a client sends at most trainer.report_client.MAX_BATCH_ROWS; this bounds a hostile request


def _bearer(request: Request) -> str:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class RunIngestApi(APIView):
    """``POST /api/v1/runs/<id>/ingest/``: one batch of metrics, samples, heartbeat and log tail, idempotent.

    Authorised by the run's own ingest token (``Authorization: Bearer …``), not a user's: a token leaked from a
    training job writes to that run only, until it expires or is revoked (401), and never after the run ended (409).
    Answers the counts stored, ``refused`` (row, field, reason of every row not stored) and ``stop``; a replayed
    batch answers zero new samples. A body that is not a JSON object with lists is a 400 naming the field.
    """

    authentication_classes: tuple[Any, ...] = ()
    permission_classes = (AllowAny,)

    @extend_schema(
        request=inline_serializer(
            "IngestBatch",
            {
                "metrics": serializers.ListField(child=serializers.DictField(), required=False),
                "samples": serializers.ListField(child=serializers.DictField(), required=False),
                "progress": serializers.DictField(required=False),
                "log_tail": serializers.CharField(required=False),
                "heartbeat": serializers.BooleanField(required=False),
                "final": serializers.ChoiceField(choices=["finished", "failed"], required=False),
            },
        ),
        responses={
            200: inline_serializer(
                "IngestResult",
                {
                    "metrics": serializers.IntegerField(),
                    "samples": serializers.IntegerField(),
                    "refused": serializers.ListField(child=serializers.DictField()),
                    "stop": serializers.BooleanField(),
                },
            )
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        token = _bearer(request)
        if ingest.token_run_id(token) != run_id:
            return Response({"detail": "a valid ingest token of this run is required"}, status=401)
        run = get_object_or_404(Run, pk=run_id)
        refusal = ingest.token_refusal(token, run)
        if refusal:
            return Response({"detail": refusal}, status=401)
        refusal = ingest.run_refusal(run)
        if refusal:
            # The trainer stops on ``stop`` (trainer.report_client); ``ended`` says why nothing more is taken.
            return Response(
                {"detail": refusal, "ended": run.status, "stop": True}, status=status.HTTP_409_CONFLICT
            )
        try:
            batch = request.data
        except ParseError as exc:
            return Response({"detail": f"the body is not valid JSON: {exc.detail}", "field": ""}, status=400)
        except RecursionError:
            return Response({"detail": "the body's JSON is nested too deep", "field": ""}, status=400)
        if not isinstance(batch, dict):
            return Response(
                {"detail": "a JSON object is expected", "field": ""}, status=status.HTTP_400_BAD_REQUEST
            )
        for name in ("metrics", "samples"):
            rows = batch.get(name)
            if rows is not None and not isinstance(rows, list):
                return Response(
                    {"detail": f"{name} must be a list", "field": name}, status=status.HTTP_400_BAD_REQUEST
                )
        if len(batch.get("metrics") or ()) + len(batch.get("samples") or ()) > MAX_ROWS:
            return Response(
                {"detail": f"at most {MAX_ROWS} rows per batch", "field": "metrics+samples"}, status=413
            )
        # Every row is checked on its own: what is valid is stored, the rest answered in ``refused`` (200).
        return Response(ingest.store_batch(run_id=run_id, batch=batch))


class RunIngestTokenApi(APIView):
    """``POST /api/v1/runs/<id>/ingest-token/``: the run's ingest token, for a researcher starting a trainer (or a
    veRL follower) that reports to this run from elsewhere."""

    @extend_schema(
        request=None, responses={200: inline_serializer("IngestToken", {"token": serializers.CharField()})}
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(Run, pk=run_id)
        refusal = ingest.run_refusal(run)
        if refusal:
            return Response({"detail": refusal}, status=status.HTTP_409_CONFLICT)
        return Response({"run": run.pk, "token": ingest.ingest_token(run.pk)})


class RunIngestTokenRevokeApi(APIView):
    """``POST /api/v1/runs/<id>/ingest-token/revoke/``: every ingest token issued for the run so far stops working
    (401 on its next report); a token asked for afterwards works."""

    @extend_schema(
        request=None,
        responses={200: inline_serializer("IngestTokenRevoked", {"generation": serializers.IntegerField()})},
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(Run, pk=run_id)
        return Response({"run": run.pk, "generation": reporting.tokens_revoke(run_id=run.pk)})


class ExternalRunCreateApi(APIView):
    """``POST /api/v1/runs/external/``: a run that a trainer outside searchlab reports to (a veRL run followed by
    ``python -m trainer.verl_follower``, a custom trainer using ``trainer.report_client``). It is ``running`` from
    the start, its executor is ``external`` (its reporter ends it with ``final``), and the answer holds its ingest
    token."""

    class ExternalRunInput(serializers.Serializer):
        name = serializers.CharField(max_length=200)
        method = serializers.ChoiceField(choices=Method.choices)
        model_name = serializers.CharField(max_length=200)
        algorithm = serializers.ChoiceField(choices=Run.Algorithm.choices, default="grpo")
        config = serializers.DictField(
            required=False, help_text="the external trainer's own settings, kept as is"
        )

    @extend_schema(
        request=ExternalRunInput,
        responses={
            201: inline_serializer(
                "ExternalRun", {"run": serializers.IntegerField(), "token": serializers.CharField()}
            )
        },
    )
    def post(self, request: Request) -> Response:
        from django.db import transaction

        from webapp.runs.services import run_create, run_mark_started

        data = self.ExternalRunInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        with transaction.atomic():
            run = run_create(
                name=values["name"],
                method=values["method"],
                model_name=values["model_name"],
                kind=Run.Kind.TRAIN,
                algorithm=values["algorithm"],
                config={**values.get("config", {}), CONFIG_KEY: Placement.EXTERNAL.value},
                created_by=request.user,  # type: ignore[arg-type]
            )
            run_mark_started(run_id=run.pk)
        return Response({"run": run.pk, "token": ingest.ingest_token(run.pk)}, status=status.HTTP_201_CREATED)
