"""Reads of experiments: the list, the stages, and the papers' table with paired-bootstrap differences."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.db.models import Max, QuerySet

from scoring.aggregates import MICRO
from scoring.paired_bootstrap import DEFAULT_CONFIDENCE, METRICS, Difference
from webapp.evaluation.compare import paired_differences
from webapp.evaluation.selectors import evaluation_report_rows
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.specs import Arm, ExperimentSpec
from webapp.runs.models import MetricPoint, Run


def experiment_list() -> QuerySet[Experiment]:
    return Experiment.objects.select_related("created_by").order_by("-created_at", "-id")


def experiment_links(*, experiment_id: int) -> list[ExperimentRun]:
    return list(
        ExperimentRun.objects.filter(experiment_id=experiment_id).select_related("run").order_by("position")
    )


Key = tuple[str, str, str]  # (role, method, arm): a stage (webapp.experiments.services.Stage)


def _links(experiment: Experiment) -> dict[Key, ExperimentRun]:
    return {
        (link.role, link.method, link.arm): link for link in experiment_links(experiment_id=experiment.pk)
    }


def _start(method: str) -> Key:
    return (ExperimentRun.Role.START_EVAL.value, method, "")


def _trained(arm: Arm) -> Key:
    return (ExperimentRun.Role.EVAL.value, arm.method, arm.name)


def _finished_run(links: dict[Key, ExperimentRun], key: Key) -> Run | None:
    link = links.get(key)
    return link.run if link is not None and link.run.status == Run.Status.FINISHED else None


def _steps_trained(links: dict[Key, ExperimentRun], arm: Arm, asked: int) -> int:
    """The steps the arm's training logged (fewer than asked when a time budget or a stop file ended it early),
    or the steps asked when it logged none."""
    link = links.get((ExperimentRun.Role.TRAIN.value, arm.method, arm.name))
    if link is None:
        return asked
    last = MetricPoint.objects.filter(run_id=link.run_id).aggregate(last=Max("step"))["last"]
    return int(last) if last else asked


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


def _row(run: Run, label: str, role: str, arm: Arm, steps: int) -> dict[str, Any] | None:
    pooled = next((r for r in evaluation_report_rows(run_id=run.pk) if r["dataset"] == MICRO), None)
    if pooled is None:
        return None
    return {
        "label": label,
        "role": role,
        "method": arm.method,
        "arm": arm.name if role == ExperimentRun.Role.EVAL else "",
        "run_id": run.pk,
        "steps": steps,
        "n": pooled["n_trajectories"],
        **{key: pooled.get(key) for key in METRICS},
        "n_judge_errors": pooled.get("n_judge_errors", 0),
    }


def experiment_result(*, experiment: Experiment) -> dict[str, Any]:
    """The table (the start model once per method, then each arm's trained model: the pooled report row) and, per
    comparison, the paired-bootstrap differences on the held-out questions both runs answered: every other
    trained arm minus the trained baseline arm, and every trained arm minus its method's start."""
    spec = ExperimentSpec.from_json(experiment.spec)
    links = _links(experiment)
    rows = []
    shown: set[str] = set()
    for arm in spec.ordered_arms():
        start = _finished_run(links, _start(arm.method))
        if start is not None and arm.method not in shown:
            shown.add(arm.method)
            rows.append(_row(start, f"start · {arm.method}", ExperimentRun.Role.START_EVAL, arm, 0))
        trained = _finished_run(links, _trained(arm))
        if trained is not None:
            steps = _steps_trained(links, arm, spec.steps)
            rows.append(_row(trained, f"trained · {arm.name}", ExperimentRun.Role.EVAL, arm, steps))
    baseline = spec.arm(spec.baseline)
    base_trained = _finished_run(links, _trained(baseline))
    comparisons: list[tuple[str, Run | None, Run | None]] = [
        (f"{arm.name} − {baseline.name} (trained)", base_trained, _finished_run(links, _trained(arm)))
        for arm in spec.others
    ]
    comparisons += [
        (
            f"{arm.name}: trained − start",
            _finished_run(links, _start(arm.method)),
            _finished_run(links, _trained(arm)),
        )
        for arm in spec.ordered_arms()
    ]
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
        "rows": [row for row in rows if row is not None],
        "differences": differences,
        "resamples": spec.resamples,
        "confidence": DEFAULT_CONFIDENCE,
        "judge": spec.judge.label,
        "baseline": spec.baseline,
        "arms": [
            {"name": arm.name, "method": arm.method, "params": arm.params} for arm in spec.ordered_arms()
        ],
    }


def experiment_compare_query(*, experiment: Experiment) -> str:
    """The compare page's query of the experiment's evaluations: A = the trained baseline arm, B = the first other
    trained arm (or the baseline's start), every evaluation in ``runs``."""
    spec = ExperimentSpec.from_json(experiment.spec)
    links = _links(experiment)
    evals = [
        link.run_id
        for link in sorted(links.values(), key=lambda link: link.position)
        if link.role in (ExperimentRun.Role.START_EVAL, ExperimentRun.Role.EVAL)
    ]
    if len(evals) < 2:
        return ""
    baseline = spec.arm(spec.baseline)
    base = links.get(_trained(baseline))
    other = next((links[_trained(arm)] for arm in spec.others if _trained(arm) in links), None)
    start = links.get(_start(baseline.method))
    a = base.run_id if base is not None else evals[0]
    b = (
        other.run_id
        if other is not None
        else (start.run_id if start is not None and start.run_id != a else evals[1])
    )
    if a == b:
        b = next(pk for pk in evals if pk != a)
    return urlencode({"a": a, "b": b, "runs": ",".join(str(pk) for pk in evals)})
