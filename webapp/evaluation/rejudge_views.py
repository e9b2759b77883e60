"""Re-judging a stored run, from its page and the API (thin: webapp.evaluation.rejudge does the work)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.judge_spec import REJUDGE, kind_choices
from webapp.evaluation import rejudge
from webapp.evaluation.models import RejudgeJob
from webapp.runs.models import Run


class RejudgeForm(forms.Form):
    kind = forms.ChoiceField(choices=kind_choices(REJUDGE))  # agent.judge_spec.KINDS
    base_url = forms.CharField(required=False, label="judge base URL")
    model = forms.CharField(required=False, label="judge model")
    api_key_env = forms.CharField(required=False, label="API key variable (its NAME)")
    temperature = forms.FloatField(required=False, min_value=0.0, max_value=2.0)


def jobs_context(run: Run) -> dict[str, Any]:
    jobs = list(RejudgeJob.objects.filter(run=run).select_related("version")[:10])
    return {
        "run": run,
        "rejudge_jobs": [
            (
                job,
                rejudge.judge_cost(
                    job.version.model if job.version else "", job.prompt_tokens, job.completion_tokens
                ),
            )
            for job in jobs
        ],
        "rejudge_active": any(job.is_active for job in jobs),
        "rejudge_form": RejudgeForm(),
    }


def rejudge_fragment(request: HttpRequest, run_id: int) -> HttpResponse:
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise Http404("No such run")
    return render(request, "evaluation/_rejudge.html", jobs_context(run))


@require_POST
def rejudge_start(request: HttpRequest, run_id: int) -> HttpResponse:
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise Http404("No such run")
    form = RejudgeForm(request.POST)
    if form.is_valid():
        judge = {k: v for k, v in form.cleaned_data.items() if v not in (None, "")}
        try:
            rejudge.rejudge_create(run=run, judge=judge, user=request.user)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
    if form.errors:
        context = {**jobs_context(run), "rejudge_form": form}
        return render(request, "evaluation/_rejudge.html", context, status=400)
    return redirect(f"/runs/{run.pk}/#rejudge")


@extend_schema_serializer(component_name="RejudgeJob")
class JobOutput(serializers.ModelSerializer):
    judge_version = serializers.CharField(source="version.name", allow_null=True, default=None)
    cost = serializers.SerializerMethodField(
        help_text="money at the judge model's price (JudgePrice), or null"
    )
    currency = serializers.SerializerMethodField()

    class Meta:
        model = RejudgeJob
        fields = (
            "id",
            "run",
            "judge",
            "judge_version",
            "status",
            "n_trajectories",
            "n_done",
            "n_verdicts",
            "n_errors",
            "n_retries",
            "n_calls",
            "prompt_tokens",
            "completion_tokens",
            "latency_seconds",
            "seconds",
            "cost",
            "currency",
            "error",
            "error_examples",
            "created_at",
            "finished_at",
        )

    def _cost(self, job: RejudgeJob) -> tuple[float, str] | None:
        model = job.version.model if job.version else ""
        return rejudge.judge_cost(model, job.prompt_tokens, job.completion_tokens)

    def get_cost(self, job: RejudgeJob) -> float | None:
        found = self._cost(job)
        return found[0] if found else None

    def get_currency(self, job: RejudgeJob) -> str | None:
        found = self._cost(job)
        return found[1] if found else None


class RunRejudgeApi(APIView):
    """Judge a stored HiPRAG run's trajectories again with another judge (a background job): POST the judge
    (``{"kind": "evidence"}`` or ``{"kind": "openai", "base_url", "model", "api_key_env"?, "temperature"?}``);
    GET lists the run's re-judge jobs, newest first."""

    class Input(serializers.Serializer):
        judge = serializers.DictField(help_text="kind: evidence | openai, and the endpoint's settings")

    @extend_schema(responses=JobOutput(many=True), operation_id="runs_rejudge_list")
    def get(self, request: Request, run_id: int) -> Response:
        jobs = RejudgeJob.objects.filter(run_id=run_id).select_related("version")
        return Response(JobOutput(jobs, many=True).data)

    @extend_schema(request=Input, responses={201: JobOutput}, operation_id="runs_rejudge_create")
    def post(self, request: Request, run_id: int) -> Response:
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            return Response({"detail": f"No run {run_id}."}, status=404)
        given = self.Input(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            job = rejudge.rejudge_create(run=run, judge=given.validated_data["judge"], user=request.user)
        except ValidationError as exc:
            return Response(exc.message_dict, status=400)
        return Response(JobOutput(job).data, status=201)


class RejudgeJobApi(APIView):
    """One re-judge job: its progress, errors, tokens, latency and cost."""

    @extend_schema(responses=JobOutput, operation_id="rejudge_job")
    def get(self, request: Request, job_id: int) -> Response:
        job = RejudgeJob.objects.filter(pk=job_id).select_related("version").first()
        if job is None:
            return Response({"detail": f"No re-judge job {job_id}."}, status=404)
        return Response(JobOutput(job).data)
