"""REST API: the audits, and an audit's judge-vs-human agreement report (researchers and admins only)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scoring.agreement import Coefficient
from scoring.agreement_bootstrap import Interval
from webapp.api.pagination import PageNumberPagination
from webapp.audits import report, selectors
from webapp.audits.models import Audit


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
    labels = serializers.ListField(child=serializers.CharField(), help_text="the confusion matrix's order")
    n_steps = serializers.IntegerField(help_text="audited steps of the detector's kind")
    n_labelled = serializers.IntegerField()
    n_compared = serializers.IntegerField(help_text="steps with a usable verdict and a human answer")
    n_trajectories = serializers.IntegerField(help_text="the bootstrap's clusters")
    n_judge_errors = serializers.IntegerField(help_text="ERROR verdicts: left out, never read as 'no'")
    n_no_verdict = serializers.IntegerField()
    n_no_consensus = serializers.IntegerField(help_text="human unsure, or annotators tied")
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


def _statistic(value: Coefficient | float | None, interval: Interval) -> dict[str, Any]:
    if isinstance(value, Coefficient):
        found = {
            "value": value.value,
            "observed": value.observed,
            "expected": value.expected,
            "reason": value.reason,
        }
    else:
        found = {"value": value, "observed": value, "expected": None, "reason": None}
    return {
        **found,
        "ci_low": interval.low,
        "ci_high": interval.high,
        "n_undefined_resamples": interval.n_undefined,
    }


def section_as_dict(section: report.DetectorSection) -> dict[str, Any]:
    agreement = section.agreement
    names = section.detector.label_names
    inter = section.inter_annotator
    return {
        "detector": section.detector.name,
        "judge_model": section.judge_model,
        "labels": [names[label] for label in agreement.labels],
        "n_steps": section.n_steps,
        "n_labelled": section.n_labelled,
        "n_compared": agreement.n_items,
        "n_trajectories": agreement.n_trajectories,
        "n_judge_errors": section.n_judge_errors,
        "n_no_verdict": section.n_no_verdict,
        "n_no_consensus": section.n_no_consensus,
        **{
            key: _statistic(getattr(agreement, key), agreement.intervals[key])
            for key in ("percent_agreement", "cohen_kappa", "gwet_ac1", "krippendorff_alpha")
        },
        "confusion": [list(row) for row in agreement.confusion.counts],
        "per_label": [
            {
                "label": names[scores.label],
                "precision": scores.precision,
                "recall": scores.recall,
                "f1": scores.f1,
                "support": scores.support,
                "predicted": scores.predicted,
            }
            for scores in agreement.per_label
        ],
        "inter_annotator": None
        if inter is None
        else {
            "n_units": inter.n_units,
            **{
                key: _statistic(getattr(inter, key), inter.intervals[key])
                for key in ("percent_agreement", "gwet_ac1", "krippendorff_alpha")
            },
        },
        "disagreements": [
            {
                "trajectory_id": row.step.trajectory_id,
                "step_id": row.step.step_id,
                "step_index": row.step.index,
                "judge": row.judge,
                "human": row.human,
                "human_labels": list(row.human_labels),
            }
            for row in section.disagreements
        ],
    }


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

        audit = serializers.IntegerField()
        name = serializers.CharField()
        n_items = serializers.IntegerField()
        n_steps = serializers.IntegerField()
        confidence = serializers.FloatField()
        n_resamples = serializers.IntegerField()
        progress = ProgressOutput(many=True)
        detectors = SectionOutput(many=True)

    @extend_schema(responses=Output, operation_id="audits_agreement")
    def get(self, request: Request, audit_id: int) -> Response:
        try:
            audit = selectors.audit_get(audit_id=audit_id)
        except Audit.DoesNotExist:
            return Response({"detail": "No such audit."}, status=404)
        found = report.audit_report(audit=audit)
        data = {
            "audit": audit.pk,
            "name": audit.name,
            "n_items": found.n_items,
            "n_steps": found.n_steps,
            "confidence": report.CONFIDENCE,
            "n_resamples": report.N_RESAMPLES,
            "progress": [vars(row) for row in found.progress],
            "detectors": [section_as_dict(section) for section in found.sections],
        }
        return Response(self.Output(data).data)
