"""REST API: the audits, and an audit's judge-vs-human agreement report (researchers and admins only)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.audits import export, selectors, services
from webapp.audits.models import Audit, FrozenReport
from webapp.common.pagination import PageNumberPagination
from webapp.common.renderers import CsvRenderer, JsonlRenderer


class AuditOutput(serializers.ModelSerializer):
    source_runs = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    annotators = serializers.SlugRelatedField(many=True, read_only=True, slug_field="username")
    n_items = serializers.IntegerField(help_text="trajectories sampled")
    n_labels = serializers.IntegerField(help_text="step labels saved so far")

    class Meta:
        model = Audit
        fields = (
            "id",
            "name",
            "source_runs",
            "sample_size",
            "seed",
            "stratification",
            "annotators_per_item",
            "annotators",
            "blind",
            "status",
            "created_at",
            "n_items",
            "n_labels",
        )


class AuditListApi(APIView):
    @extend_schema(responses=AuditOutput(many=True), operation_id="audits_list")
    def get(self, request: Request) -> Response:
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(
            selectors.audit_list().prefetch_related("annotators"), request, view=self
        )
        return paginator.get_paginated_response(AuditOutput(page, many=True).data)


@extend_schema_serializer(component_name="AgreementStatistic")
class StatisticOutput(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    observed = serializers.FloatField(allow_null=True, help_text="p_o (p_a); 1 − D_o for α")
    expected = serializers.FloatField(allow_null=True, help_text="chance agreement p_e; 1 − D_e for α")
    reason = serializers.CharField(allow_null=True, help_text="why the value is undefined")
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    n_undefined_resamples = serializers.IntegerField()


@extend_schema_serializer(component_name="AgreementLabelScores")
class LabelScoresOutput(serializers.Serializer):
    label = serializers.CharField()
    precision = serializers.FloatField(allow_null=True)
    recall = serializers.FloatField(allow_null=True)
    f1 = serializers.FloatField(allow_null=True)
    support = serializers.IntegerField(help_text="steps the humans gave this label")
    predicted = serializers.IntegerField(help_text="steps the judge gave this label")


@extend_schema_serializer(component_name="AuditDisagreement")
class DisagreementOutput(serializers.Serializer):
    trajectory_id = serializers.IntegerField()
    step_id = serializers.IntegerField()
    step_index = serializers.IntegerField()
    judge = serializers.CharField()
    human = serializers.CharField()
    human_labels = serializers.ListField(child=serializers.CharField())


@extend_schema_serializer(component_name="AuditDetectorAgreement")
class SectionOutput(serializers.Serializer):
    detector = serializers.CharField(
        help_text="over_search (search steps) or under_search (non-search steps)"
    )
    judge_model = serializers.CharField(allow_null=True)
    judge_version = serializers.CharField(
        allow_null=True, help_text="the judge version's name (kind, model, prompts, parser, sampling hashed)"
    )
    labels = serializers.ListField(child=serializers.CharField(), help_text="the confusion matrix's order")
    n_steps = serializers.IntegerField(help_text="audited steps of the detector's kind")
    n_labelled = serializers.IntegerField()
    n_compared = serializers.IntegerField(help_text="steps with a usable verdict and a human answer")
    n_trajectories = serializers.IntegerField(help_text="the bootstrap's clusters")
    n_judge_errors = serializers.IntegerField(help_text="ERROR verdicts: left out, never read as 'no'")
    n_no_verdict = serializers.IntegerField()
    n_no_consensus = serializers.IntegerField(help_text="human unsure, or annotators tied (not adjudicated)")
    n_adjudicated = serializers.IntegerField(
        help_text="steps whose human answer is a researcher's adjudication"
    )
    percent_agreement = StatisticOutput(help_text="the judge's accuracy, the human being the truth")
    cohen_kappa = StatisticOutput()
    gwet_ac1 = StatisticOutput()
    krippendorff_alpha = StatisticOutput()
    confusion = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="rows: the human's label, columns: the judge's, in `labels` order",
    )
    per_label = LabelScoresOutput(many=True)
    inter_annotator = serializers.DictField(
        allow_null=True, help_text="n_units and the multi-rater statistics"
    )
    disagreements = DisagreementOutput(many=True)


class AuditAgreementApi(APIView):
    """Judge-vs-human agreement per detector and judge model, with 95% bootstrap intervals resampled by
    trajectory; inter-annotator agreement when steps have several labels; progress per annotator."""

    @extend_schema_serializer(component_name="AuditAgreement")
    class Output(serializers.Serializer):
        @extend_schema_serializer(component_name="AuditProgress")
        class ProgressOutput(serializers.Serializer):
            username = serializers.CharField()
            n_items = serializers.IntegerField()
            n_items_done = serializers.IntegerField()
            n_steps = serializers.IntegerField()
            n_labelled = serializers.IntegerField()
            seconds = serializers.IntegerField()

        @extend_schema_serializer(component_name="AuditOverallProgress")
        class OverallOutput(serializers.Serializer):
            n_items = serializers.IntegerField()
            n_items_complete = serializers.IntegerField(help_text="labelled by every assignee, every step")
            n_labels = serializers.IntegerField()
            n_labels_needed = serializers.IntegerField(help_text="Σ steps × assignees")

        audit = serializers.IntegerField()
        name = serializers.CharField()
        status = serializers.CharField()
        seed = serializers.IntegerField()
        frozen_report_id = serializers.IntegerField(
            allow_null=True, help_text="set when the audit is closed: these numbers are that frozen report's"
        )
        n_items = serializers.IntegerField()
        n_steps = serializers.IntegerField()
        n_adjudicated = serializers.IntegerField()
        n_contested = serializers.IntegerField(help_text="steps whose annotators disagree")
        confidence = serializers.FloatField()
        n_resamples = serializers.IntegerField()
        overall = OverallOutput()
        progress = ProgressOutput(many=True)
        detectors = SectionOutput(many=True)

    @extend_schema(responses=Output, operation_id="audits_agreement")
    def get(self, request: Request, audit_id: int) -> Response:
        try:
            audit = selectors.audit_get(audit_id=audit_id)
        except Audit.DoesNotExist:
            return Response({"detail": f"No audit {audit_id}."}, status=404)
        data, frozen_id = export.report_data_of(audit)
        return Response(self.Output({**data, "frozen_report_id": frozen_id}).data)


class FrozenReportApi(APIView):
    """A report frozen when its audit was closed, by the id it is cited by (stored, never recomputed)."""

    @extend_schema(responses=AuditAgreementApi.Output, operation_id="audits_frozen_report")
    def get(self, request: Request, report_id: int) -> Response:
        try:
            frozen = selectors.frozen_report_get(report_id=report_id)
        except FrozenReport.DoesNotExist:
            return Response({"detail": f"No frozen audit report {report_id}."}, status=404)
        return Response(
            {
                **frozen.report,
                "frozen_report_id": frozen.pk,
                "sha256": frozen.sha256,
                "closed_at": frozen.created_at,
            }
        )


class AuditStatusApi(APIView):
    """Pause, resume, close (freezing the report: its id is returned) or reopen an audit."""

    class Input(serializers.Serializer):
        action = serializers.ChoiceField(choices=list(services.TRANSITIONS))

    @extend_schema(request=Input, responses=OpenApiTypes.OBJECT, operation_id="audits_status")
    def post(self, request: Request, audit_id: int) -> Response:
        given = self.Input(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            audit = selectors.audit_get(audit_id=audit_id)
        except Audit.DoesNotExist:
            return Response({"detail": f"No audit {audit_id}."}, status=404)
        try:
            frozen = services.audit_transition(
                audit=audit, action=given.validated_data["action"], by=request.user
            )
        except ValidationError as exc:
            return Response({"detail": "; ".join(exc.messages)}, status=409)
        return Response(
            {"audit": audit.pk, "status": audit.status, "frozen_report_id": frozen.pk if frozen else None}
        )


class _AuditExport(APIView):
    renderer_classes = (JSONRenderer, JsonlRenderer, CsvRenderer)

    def export(self, audit_id: int, table: str | None) -> HttpResponse:
        try:
            audit = selectors.audit_get(audit_id=audit_id)
        except Audit.DoesNotExist:
            return Response({"detail": f"No audit {audit_id}."}, status=404)
        if table is None:
            body, content_type, name = export.as_jsonl(audit), "application/jsonl", f"audit-{audit.pk}.jsonl"
        elif table in export.TABLES:
            body, content_type, name = (
                export.as_csv(audit, table),
                "text/csv",
                f"audit-{audit.pk}-{table}.csv",
            )
        else:
            return Response(
                {"detail": f"No export table {table!r}: one of {', '.join(export.TABLES)}."}, status=404
            )
        response = HttpResponse(body, content_type=f"{content_type}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


class AuditExportJsonlApi(_AuditExport):
    """The audit's settings and seed, items, labels, adjudications, verdicts and report in one JSON lines file
    (``record`` names the table of each line; the report is the frozen one for a closed audit)."""

    @extend_schema(
        responses={(200, "application/jsonl"): OpenApiResponse(OpenApiTypes.STR)},
        operation_id="audits_export_jsonl",
    )
    def get(self, request: Request, audit_id: int) -> HttpResponse:
        return self.export(audit_id, None)


class AuditExportCsvApi(_AuditExport):
    """One table of the export as CSV: settings, items, labels, adjudications, verdicts or report."""

    @extend_schema(
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR)}, operation_id="audits_export_csv"
    )
    def get(self, request: Request, audit_id: int, table: str) -> HttpResponse:
        return self.export(audit_id, table)
