"""Reads of experiments: the list, the stages, and the papers' table with paired-bootstrap differences."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet

from scoring.aggregates import MICRO
from scoring.paired_bootstrap import DEFAULT_CONFIDENCE, METRICS, Difference
from webapp.evaluation.compare import paired_differences
from webapp.evaluation.selectors import evaluation_report_rows
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.specs import ExperimentSpec
from webapp.runs.models import Run

ROLE_LABELS = {ExperimentRun.Role.START_EVAL: "start", ExperimentRun.Role.EVAL: "trained"}


def experiment_list() -> QuerySet[Experiment]:
    return Experiment.objects.select_related("created_by").order_by("-created_at", "-id")


def experiment_links(*, experiment_id: int) -> list[ExperimentRun]:
    return list(
        ExperimentRun.objects.filter(experiment_id=experiment_id).select_related("run").order_by("position")
    )


def _links(experiment: Experiment) -> dict[tuple[str, str], ExperimentRun]:
    return {(link.role, link.method): link for link in experiment_links(experiment_id=experiment.pk)}


def _finished_run(links: dict[tuple[str, str], ExperimentRun], role: str, method: str) -> Run | None:
    link = links.get((role, method))
    return link.run if link is not None and link.run.status == Run.Status.FINISHED else None


def _difference_json(d: Difference) -> dict[str, Any]:
    return {
        "metric": d.metric,
        "baseline": d.baseline,
        "method": d.method,
        "difference": d.difference,
        "low": d.low,
        "high": d.high,
        "excludes_zero": d.excludes_zero,
        "n_undefined": d.n_undefined,
    }


def experiment_result(*, experiment: Experiment) -> dict[str, Any]:
    """The table (one row per evaluated model, the pooled report row) and, per comparison, the paired-bootstrap
    differences on the held-out questions both runs answered: every other trained method minus the trained
    baseline, and every trained model minus its start."""
    spec = ExperimentSpec.from_json(experiment.spec)
    links = _links(experiment)
    rows = []
    for method in spec.ordered_methods():
        for role in (ExperimentRun.Role.START_EVAL, ExperimentRun.Role.EVAL):
            run = _finished_run(links, role, method)
            if run is None:
                continue
            pooled = next((r for r in evaluation_report_rows(run_id=run.pk) if r["dataset"] == MICRO), None)
            if pooled is None:
                continue
            rows.append(
                {
                    "label": f"{ROLE_LABELS[role]} · {method}",
                    "role": role,
                    "method": method,
                    "run_id": run.pk,
                    "steps": 0 if role == ExperimentRun.Role.START_EVAL else spec.steps,
                    "n": pooled["n_trajectories"],
                    **{key: pooled.get(key) for key in METRICS},
                    "n_judge_errors": pooled.get("n_judge_errors", 0),
                }
            )
    comparisons: list[tuple[str, Run | None, Run | None]] = []
    base_trained = _finished_run(links, ExperimentRun.Role.EVAL, spec.baseline)
    for method in spec.others:
        comparisons.append(
            (
                f"{method} − {spec.baseline} (trained)",
                base_trained,
                _finished_run(links, ExperimentRun.Role.EVAL, method),
            )
        )
    for method in spec.ordered_methods():
        comparisons.append(
            (
                f"{method}: trained − start",
                _finished_run(links, ExperimentRun.Role.START_EVAL, method),
                _finished_run(links, ExperimentRun.Role.EVAL, method),
            )
        )
    differences = []
    for label, base, run in comparisons:
        if base is None or run is None:
            continue
        found = paired_differences(
            baseline_run_id=base.pk, run_id=run.pk, n_resamples=spec.resamples, seed=spec.seed
        )
        first = next(iter(found.values()))
        differences.append(
            {
                "label": label,
                "baseline_run_id": base.pk,
                "run_id": run.pk,
                "n_pairs": first.n_pairs,
                "metrics": [_difference_json(found[m]) for m in METRICS],
            }
        )
    return {
        "rows": rows,
        "differences": differences,
        "resamples": spec.resamples,
        "confidence": DEFAULT_CONFIDENCE,
        "judge": spec.judge.label,
        "baseline": spec.baseline,
    }


def experiment_compare_query(*, experiment: Experiment) -> str:
    """The compare page's query of the experiment's evaluations: A = the trained baseline, B = the first other
    trained method (or the baseline's start), every evaluation in ``runs``."""
    spec = ExperimentSpec.from_json(experiment.spec)
    links = _links(experiment)
    evals = [
        link.run_id
        for link in sorted(links.values(), key=lambda link: link.position)
        if link.role != ExperimentRun.Role.TRAIN
    ]
    if len(evals) < 2:
        return ""
    base = links.get((ExperimentRun.Role.EVAL, spec.baseline))
    other = next(
        (links[(ExperimentRun.Role.EVAL, m)] for m in spec.others if (ExperimentRun.Role.EVAL, m) in links),
        None,
    )
    start = links.get((ExperimentRun.Role.START_EVAL, spec.baseline))
    a = base.run_id if base is not None else evals[0]
    b = (
        other.run_id
        if other is not None
        else (start.run_id if start is not None and start.run_id != a else evals[1])
    )
    if a == b:
        b = next(pk for pk in evals if pk != a)
    return urlencode({"a": a, "b": b, "runs": ",".join(str(pk) for pk in evals)})
