"""The agreement report as plain JSON-ready data: what the API returns, what a closed audit freezes, and what the
export writes. One shape for all three, so a cited frozen report reads exactly like the live API."""

from __future__ import annotations

from typing import Any

from scoring.agreement import Coefficient
from scoring.agreement_bootstrap import Interval
from webapp.audits import report


def statistic_as_dict(value: Coefficient | float | None, interval: Interval) -> dict[str, Any]:
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


def _version_model(name: str | None) -> str | None:
    """The judge model of a judge version named ``name`` (a verdict without a version is named by its model)."""
    from webapp.trajectories.models import JudgeVersion

    if name is None:
        return None
    return JudgeVersion.objects.filter(name=name).values_list("model", flat=True).first() or name


def section_as_dict(section: report.DetectorSection) -> dict[str, Any]:
    agreement = section.agreement
    names = section.detector.label_names
    inter = section.inter_annotator
    return {
        "detector": section.detector.name,
        "judge_model": _version_model(section.judge_model),
        "judge_version": section.judge_model,  # the version's name (the model where none is recorded)
        "labels": [names[label] for label in agreement.labels],
        "n_steps": section.n_steps,
        "n_labelled": section.n_labelled,
        "n_compared": agreement.n_items,
        "n_trajectories": agreement.n_trajectories,
        "n_judge_errors": section.n_judge_errors,
        "n_no_verdict": section.n_no_verdict,
        "n_no_consensus": section.n_no_consensus,
        "n_adjudicated": section.n_adjudicated,
        **{
            key: statistic_as_dict(getattr(agreement, key), agreement.intervals[key])
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
                key: statistic_as_dict(getattr(inter, key), inter.intervals[key])
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


def report_as_dict(found: report.AuditReport) -> dict[str, Any]:
    audit = found.audit
    return {
        "audit": audit.pk,
        "name": audit.name,
        "status": audit.status,
        "seed": audit.seed,
        "n_items": found.n_items,
        "n_steps": found.n_steps,
        "n_adjudicated": found.n_adjudicated,
        "n_contested": found.n_contested,
        "confidence": report.CONFIDENCE,
        "n_resamples": report.N_RESAMPLES,
        "overall": {
            "n_items": found.overall.n_items,
            "n_items_complete": found.overall.n_items_complete,
            "n_labels": found.overall.n_labels,
            "n_labels_needed": found.overall.n_labels_needed,
        },
        "progress": [vars(row) for row in found.progress],
        "detectors": [section_as_dict(section) for section in found.sections],
    }
