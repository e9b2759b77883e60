"""REST API: an evaluation run's report in the papers' layout, with its judge and generation totals."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.evaluation import selectors
from webapp.runs.models import Run


@extend_schema_serializer(component_name="EvaluationReportRow")
class ReportRowOutput(serializers.Serializer):
    dataset = serializers.CharField()
    n_trajectories = serializers.IntegerField()
    cem = serializers.FloatField(allow_null=True, help_text="cover exact match (HiPRAG §4.1)")
    acc = serializers.FloatField(
        allow_null=True,
        help_text="FlashRAG's acc (Sub_ExactMatch), the accuracy Search-R1, TIRESRAG-R1 and AutoSearch report; "
        "null in a report stored before it was measured",
    )
    em = serializers.FloatField(allow_null=True)
    f1 = serializers.FloatField(allow_null=True)
    osr = serializers.FloatField(allow_null=True, help_text="over-search rate, HiPRAG Eq. 2 (over steps)")
    usr = serializers.FloatField(allow_null=True, help_text="under-search rate, HiPRAG Eq. 2 (over steps)")
    average_searches = serializers.FloatField(allow_null=True, help_text="HiPRAG Eq. 3")
    search_depth = serializers.FloatField(
        allow_null=True, source="average_searches", help_text="AutoSearch SD: the same number"
    )
    search_efficiency = serializers.FloatField(allow_null=True, help_text="AutoSearch SE = EM / SD")
    format_ok_rate = serializers.FloatField(allow_null=True)
    over_searching_ratio = serializers.FloatField(allow_null=True, help_text="AutoSearch §5.1, per sample")
    n_search_steps = serializers.IntegerField()
    n_over_search = serializers.IntegerField()
    n_non_search_steps = serializers.IntegerField()
    n_under_search = serializers.IntegerField()
    n_judge_errors = serializers.IntegerField(help_text="steps without a usable verdict (in no rate)")


class RunReportApi(APIView):
    """The report rows of a run: one per dataset (by name), then ``average`` (plain mean of the dataset rows,
    AutoSearch's Avg) and ``overall`` (every trajectory pooled, HiPRAG's Avg.). Rates are fractions in [0, 1];
    ``null`` is an undefined rate (e.g. OSR with no judged search step), never 0. Rows appear batch by batch while
    the run is running."""

    @extend_schema_serializer(component_name="EvaluationReport")
    class Output(serializers.Serializer):
        run = serializers.IntegerField()
        status = serializers.CharField()
        method = serializers.CharField()
        rows = ReportRowOutput(many=True)
        judge_stats = serializers.DictField(
            help_text="per judge model: calls, cache hits, errors, tokens, latency"
        )
        generation_tokens = serializers.DictField(child=serializers.IntegerField())
        n_trajectories = serializers.IntegerField()
        n_judge_errors = serializers.IntegerField()
        n_reward_errors = serializers.IntegerField()
        seconds = serializers.FloatField()

    @extend_schema(operation_id="runs_report", responses=Output)
    def get(self, request: Request, run_id: int) -> Response:
        run = get_object_or_404(Run.objects.only("id", "status", "method"), pk=run_id)
        stats = selectors.evaluation_stats_get(run_id=run.pk)
        rows = selectors.evaluation_report_rows(run_id=run.pk)
        return Response(
            self.Output(
                {
                    "run": run.pk,
                    "status": run.status,
                    "method": run.method,
                    "rows": rows,
                    "judge_stats": stats.judge_stats if stats else {},
                    "generation_tokens": stats.generation_tokens if stats else {},
                    "n_trajectories": stats.n_trajectories if stats else 0,
                    "n_judge_errors": stats.n_judge_errors if stats else 0,
                    "n_reward_errors": stats.n_reward_errors if stats else 0,
                    "seconds": stats.seconds if stats else 0.0,
                }
            ).data
        )
