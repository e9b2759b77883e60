"""An audit's data as tables, written as JSON lines (every table in one file) or CSV (one file per table).

Everything needed to recompute the report outside searchlab: the sampling settings and seed, the items, every
step label with the detector answer it maps to, the adjudications, the judges' verdicts on the audited steps, and
the report itself (the frozen one for a closed audit).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from webapp.audits import report, report_data, selectors
from webapp.audits.models import Adjudication, Audit, AuditItem, FrozenReport, Label
from webapp.trajectories.models import JudgeVerdict

TABLES = ("settings", "items", "labels", "adjudications", "verdicts", "report")

REPORT_COLUMNS = (
    "detector",
    "judge_model",
    "judge_version",
    "n_steps",
    "n_labelled",
    "n_compared",
    "n_adjudicated",
    "n_judge_errors",
    "n_no_verdict",
    "n_no_consensus",
    "percent_agreement",
    "percent_agreement_ci_low",
    "percent_agreement_ci_high",
    "cohen_kappa",
    "gwet_ac1",
    "krippendorff_alpha",
)


def _answer(kind: str, label: str) -> bool | None:
    """The detector's yes/no a label stands for (True = over-/under-search), as the report reads it."""
    return report.detector_for(kind).human.get(label)


def _frozen(audit: Audit) -> FrozenReport | None:
    """A closed audit's frozen report; an open or paused audit's report is computed afresh."""
    return selectors.frozen_report_latest(audit=audit) if audit.status == Audit.Status.CLOSED else None


def report_data_of(audit: Audit) -> tuple[dict[str, Any], int | None]:
    """The report to export and the id of the frozen report it is (``None``: computed now, audit not closed)."""
    frozen = _frozen(audit)
    if frozen is not None:
        return frozen.report, frozen.pk
    return report_data.report_as_dict(report.audit_report(audit=audit)), None


def settings_rows(audit: Audit, frozen_id: int | None) -> Iterator[dict[str, Any]]:
    yield {
        "audit_id": audit.pk,
        "name": audit.name,
        "status": audit.status,
        "seed": audit.seed,
        "sample_size": audit.sample_size,
        "stratification": audit.stratification,
        "oversample": audit.oversample,
        "strata_judges": audit.strata_judges,
        "annotators_per_item": audit.annotators_per_item,
        "blind": audit.blind,
        "source_run_ids": sorted(run.pk for run in audit.source_runs.all()),
        "annotators": sorted(user.get_username() for user in audit.annotators.all()),
        "guidelines": audit.guidelines,
        "created_at": audit.created_at.isoformat(),
        "frozen_report_id": frozen_id,
        # How the sample is drawn (webapp/audits/sampling.py), so it can be drawn again from the same runs.
        "sampling": "candidates = the runs' trajectories with steps, sorted by id; random.Random(seed).sample "
        "(stratified: each stratum's largest-remainder quota, then one shuffle); assignees round-robin over "
        "the annotators sorted by id",
    }


def item_rows(audit: Audit) -> Iterator[dict[str, Any]]:
    items = (
        AuditItem.objects.filter(audit=audit)
        .select_related("trajectory")
        .prefetch_related("assignees")
        .order_by("position")
    )
    for item in items:
        trajectory = item.trajectory
        yield {
            "position": item.position,
            "item_id": item.pk,
            "trajectory_id": trajectory.pk,
            "run_id": trajectory.run_id,
            "dataset_id": trajectory.dataset_id,
            "exact_match": trajectory.exact_match,
            "stratum": item.stratum,
            "weight": item.weight,  # Horvitz–Thompson: 1 / the probability that the trajectory was sampled
            "assignees": sorted(user.get_username() for user in item.assignees.all()),
        }


def label_rows(audit: Audit) -> Iterator[dict[str, Any]]:
    rows = (
        Label.objects.filter(item__audit=audit, step__isnull=False)
        .select_related("annotator", "step")
        .order_by("item__position", "step__index", "annotator__username")
        .values_list(
            "item__position",
            "item__trajectory_id",
            "step_id",
            "step__index",
            "step__kind",
            "annotator__username",
            "label",
            "comment",
            "seconds_spent",
            "updated_at",
        )
    )
    for position, trajectory_id, step_id, index, kind, annotator, label, comment, seconds, updated in rows:
        yield {
            "position": position,
            "trajectory_id": trajectory_id,
            "step_id": step_id,
            "step_index": index,
            "step_kind": kind,
            "annotator": annotator,
            "label": label,
            "answer": _answer(kind, label),
            "comment": comment,
            "seconds_spent": seconds,
            "updated_at": updated.isoformat(),
        }


def adjudication_rows(audit: Audit) -> Iterator[dict[str, Any]]:
    rows = (
        Adjudication.objects.filter(audit=audit)
        .order_by("step__trajectory_id", "step__index")
        .values_list(
            "step__trajectory_id",
            "step_id",
            "step__index",
            "step__kind",
            "label",
            "comment",
            "adjudicator__username",
            "updated_at",
        )
    )
    for trajectory_id, step_id, index, kind, label, comment, adjudicator, updated in rows:
        yield {
            "trajectory_id": trajectory_id,
            "step_id": step_id,
            "step_index": index,
            "step_kind": kind,
            "label": label,
            "answer": _answer(kind, label),
            "comment": comment,
            "adjudicator": adjudicator,
            "updated_at": updated.isoformat(),
        }


def verdict_rows(audit: Audit) -> Iterator[dict[str, Any]]:
    """The step verdicts of the two audited detectors (each applies to its own kind of step only)."""
    rows = (
        JudgeVerdict.objects.filter(
            step__trajectory__audit_items__audit=audit,
            detector__in=[detector.name for detector in report.DETECTORS],
        )
        .order_by("step__trajectory_id", "step__index", "detector", "judge_model", "version__name")
        .values_list(
            "step__trajectory_id",
            "step_id",
            "step__index",
            "step__kind",
            "detector",
            "judge_model",
            "version__name",
            "outcome",
        )
    )
    for trajectory_id, step_id, index, kind, detector, judge_model, version, outcome in rows:
        yield {
            "trajectory_id": trajectory_id,
            "step_id": step_id,
            "step_index": index,
            "step_kind": kind,
            "detector": detector,
            "judge_model": judge_model,
            "judge_version": version or judge_model,
            "outcome": outcome,
        }


def report_rows(data: dict[str, Any], frozen_id: int | None) -> Iterator[dict[str, Any]]:
    """One row per detector and judge: the CSV form of the report (the JSONL holds it whole)."""
    for section in data["detectors"]:
        row = {key: section.get(key) for key in REPORT_COLUMNS[:10]}
        row["percent_agreement"] = section["percent_agreement"]["value"]
        row["percent_agreement_ci_low"] = section["percent_agreement"]["ci_low"]
        row["percent_agreement_ci_high"] = section["percent_agreement"]["ci_high"]
        for key in ("cohen_kappa", "gwet_ac1", "krippendorff_alpha"):
            row[key] = section[key]["value"]
        yield {**row, "frozen_report_id": frozen_id}


def table_rows(audit: Audit, table: str) -> Iterator[dict[str, Any]]:
    if table not in TABLES:
        raise ValueError(f"unknown audit export table {table!r} (one of {', '.join(TABLES)})")
    if table == "report":
        data, frozen_id = report_data_of(audit)
        return report_rows(data, frozen_id)
    if table == "settings":
        frozen = _frozen(audit)
        return settings_rows(audit, frozen.pk if frozen else None)
    return {
        "items": item_rows,
        "labels": label_rows,
        "adjudications": adjudication_rows,
        "verdicts": verdict_rows,
    }[table](audit)


def as_jsonl(audit: Audit) -> str:
    """Every table in one file: each line is an object whose ``record`` says which table it belongs to; the
    report is one ``report`` record holding the whole report (as the agreement API returns it)."""
    data, frozen_id = report_data_of(audit)
    lines = [{"record": "audit", **row} for row in settings_rows(audit, frozen_id)]
    for table, rows in (
        ("item", item_rows(audit)),
        ("label", label_rows(audit)),
        ("adjudication", adjudication_rows(audit)),
        ("verdict", verdict_rows(audit)),
    ):
        lines.extend({"record": table, **row} for row in rows)
    lines.append({"record": "report", "frozen_report_id": frozen_id, **data})
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def _cell(value: Any) -> Any:
    if isinstance(value, list):
        return " ".join(str(part) for part in value)
    if value is None:
        return ""
    return value


def as_csv(audit: Audit, table: str) -> str:
    rows = list(table_rows(audit, table))
    out = io.StringIO()
    columns = list(rows[0]) if rows else _empty_columns(table)
    writer = csv.DictWriter(out, fieldnames=columns)
    writer.writeheader()
    writer.writerows({key: _cell(value) for key, value in row.items()} for row in rows)
    return out.getvalue()


def _empty_columns(table: str) -> list[str]:
    # The header of an empty table still names its columns (e.g. an audit with no adjudication yet).
    return {
        "items": [
            "position",
            "item_id",
            "trajectory_id",
            "run_id",
            "dataset_id",
            "exact_match",
            "stratum",
            "weight",
            "assignees",
        ],
        "labels": [
            "position",
            "trajectory_id",
            "step_id",
            "step_index",
            "step_kind",
            "annotator",
            "label",
            "answer",
            "comment",
            "seconds_spent",
            "updated_at",
        ],
        "adjudications": [
            "trajectory_id",
            "step_id",
            "step_index",
            "step_kind",
            "label",
            "answer",
            "comment",
            "adjudicator",
            "updated_at",
        ],
        "verdicts": [
            "trajectory_id",
            "step_id",
            "step_index",
            "step_kind",
            "detector",
            "judge_model",
            "judge_version",
            "outcome",
        ],
        "report": [*REPORT_COLUMNS, "frozen_report_id"],
    }.get(table, [])
