"""REST API: a run's raw and judge-corrected OSR/USR per judge version (webapp.audits.correction)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.audits import correction, paired_correction
from webapp.runs.models import Run


@extend_schema_serializer(component_name="CorrectedRate")
class DetectorOutput(serializers.Serializer):
    detector = serializers.CharField(help_text="over_search or under_search")
    metric = serializers.CharField(help_text="OSR or USR")
    n_flagged = serializers.IntegerField()
    n_judged = serializers.IntegerField(help_text="steps with a usable verdict of this version")
    raw = serializers.FloatField(allow_null=True, help_text="flagged / judged (a fraction)")
    raw_low = serializers.FloatField(allow_null=True)
    raw_high = serializers.FloatField(allow_null=True)
    corrected = serializers.FloatField(allow_null=True, help_text="Rogan–Gladen, clipped to [0, 1]")
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    sensitivity = serializers.FloatField(allow_null=True)
    specificity = serializers.FloatField(allow_null=True)
    audit_counts = serializers.DictField(child=serializers.IntegerField(), help_text="tp, fp, fn, tn")
    reason = serializers.CharField(allow_null=True, help_text="why there is no corrected number")
    method = serializers.CharField(allow_null=True)


@extend_schema_serializer(component_name="CorrectedDifference")
class DifferenceOutput(serializers.Serializer):
    detector = serializers.CharField()
    metric = serializers.CharField()
    n_pairs = serializers.IntegerField(help_text="questions both runs answered")
    raw = serializers.FloatField(allow_null=True, help_text="raw(run) − raw(baseline)")
    difference = serializers.FloatField(allow_null=True, help_text="corrected(run) − corrected(baseline)")
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(allow_null=True)


@extend_schema_serializer(component_name="RunCorrection")
class CorrectionOutput(serializers.Serializer):
    run_id = serializers.IntegerField()
    judge_version = serializers.CharField()
    judge_version_sha256 = serializers.CharField()
    audit_id = serializers.IntegerField(allow_null=True)
    audit_status = serializers.CharField(allow_null=True)
    provisional = serializers.BooleanField(help_text="the audit is not closed: its labels may still change")
    detectors = DetectorOutput(many=True)


class RunCorrectedRatesApi(APIView):
    """Raw and judge-corrected OSR/USR of a run, one entry per judge version of its verdicts, corrected by the
    newest closed audit of that version (else the newest labelled open one, marked provisional). With
    ``?baseline=<run id>``, also the corrected paired differences run − baseline (both by the same audit)."""

    @extend_schema_serializer(component_name="RunCorrectedRates")
    class Output(serializers.Serializer):
        run_id = serializers.IntegerField()
        versions = CorrectionOutput(many=True)
        baseline_run_id = serializers.IntegerField(allow_null=True)
        differences = DifferenceOutput(many=True)

    @extend_schema(
        responses=Output,
        operation_id="runs_corrected_rates",
        parameters=[OpenApiParameter("baseline", int, description="a run to difference against")],
    )
    def get(self, request: Request, run_id: int) -> Response:
        if not Run.objects.filter(pk=run_id).exists():
            return Response({"detail": f"No run {run_id}."}, status=404)
        baseline = request.query_params.get("baseline")
        baseline_id = None
        if baseline is not None:
            if not baseline.isdigit() or not Run.objects.filter(pk=int(baseline)).exists():
                return Response({"baseline": [f"no run {baseline!r}"]}, status=400)
            baseline_id = int(baseline)
        versions = [correction.correction_as_dict(c) for c in correction.run_corrections(run_id=run_id)]
        differences = (
            [
                {
                    "detector": d.detector,
                    "metric": d.metric,
                    "n_pairs": d.n_pairs,
                    "raw": d.raw,
                    "difference": d.difference,
                    "low": d.low,
                    "high": d.high,
                    "reason": d.reason,
                }
                for d in paired_correction.corrected_differences(baseline_run_id=baseline_id, run_id=run_id)
            ]
            if baseline_id is not None
            else []
        )
        return Response(
            self.Output(
                {
                    "run_id": run_id,
                    "versions": versions,
                    "baseline_run_id": baseline_id,
                    "differences": differences,
                }
            ).data
        )
