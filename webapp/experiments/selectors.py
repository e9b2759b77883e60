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


Key = tuple[str, str, str, int]  # (role, method, arm, seed): a stage (webapp.experiments.services.Stage)


def _links(experiment: Experiment) -> dict[Key, ExperimentRun]:
    return {
        (link.role, link.method, link.arm, link.seed): link
        for link in experiment_links(experiment_id=experiment.pk)
    }


def _start(spec: ExperimentSpec, method: str) -> Key:
    return (ExperimentRun.Role.START_EVAL.value, method, "", spec.seed)


def _trained(arm: Arm, seed: int) -> Key:
    return (ExperimentRun.Role.EVAL.value, arm.method, arm.name, seed)


def _finished_run(links: dict[Key, ExperimentRun], key: Key) -> Run | None:
    link = links.get(key)
    return link.run if link is not None and link.run.status == Run.Status.FINISHED else None


def _steps_trained(links: dict[Key, ExperimentRun], arm: Arm, seed: int, asked: int) -> int:
    """The steps the arm's training with ``seed`` logged (fewer than asked when a time budget or a stop file ended
    it early), or the steps asked when it logged none."""
    link = links.get((ExperimentRun.Role.TRAIN.value, arm.method, arm.name, seed))
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


def _table_rows(spec: ExperimentSpec, links: dict[Key, ExperimentRun]) -> list[dict[str, Any]]:
    """The start model once per method, then per seed pair each arm's trained model (the pooled report rows)."""
    several = spec.seeds > 1
    rows = []
    shown: set[str] = set()
    for seed in spec.seed_list:
        for arm in spec.ordered_arms():
            start = _finished_run(links, _start(spec, arm.method))
            if start is not None and arm.method not in shown:
                shown.add(arm.method)
                rows.append(_row(start, f"start · {arm.method}", ExperimentRun.Role.START_EVAL, arm, 0))
            trained = _finished_run(links, _trained(arm, seed))
            if trained is not None:
                steps = _steps_trained(links, arm, seed, spec.steps)
                label = f"trained · {arm.name}" + (f" · seed {seed}" if several else "")
                row = _row(trained, label, ExperimentRun.Role.EVAL, arm, steps)
                rows.append({**row, "seed": seed} if several and row is not None else row)
    return [row for row in rows if row is not None]


def _differences(spec: ExperimentSpec, links: dict[Key, ExperimentRun]) -> list[dict[str, Any]]:
    """Per seed pair, every other trained arm minus the trained baseline and every trained arm minus its method's
    start: the paired-bootstrap differences on the held-out questions both runs answered."""
    baseline = spec.arm(spec.baseline)
    comparisons: list[tuple[str, Run | None, Run | None]] = []
    for seed in spec.seed_list:
        suffix = f" · seed {seed}" if spec.seeds > 1 else ""
        base_trained = _finished_run(links, _trained(baseline, seed))
        comparisons += [
            (
                f"{arm.name} − {baseline.name} (trained){suffix}",
                base_trained,
                _finished_run(links, _trained(arm, seed)),
            )
            for arm in spec.others
        ]
        comparisons += [
            (
                f"{arm.name}: trained − start{suffix}",
                _finished_run(links, _start(spec, arm.method)),
                _finished_run(links, _trained(arm, seed)),
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
    return differences


def experiment_result(*, experiment: Experiment) -> dict[str, Any]:
    """The table (the start model once per method, then each arm's trained model: the pooled report row) and, per
    comparison, the paired-bootstrap differences on the held-out questions both runs answered: every other
    trained arm minus the trained baseline arm, and every trained arm minus its method's start. With several seed
    pairs, the same per pair, and ``pairs`` and ``pooled`` (:func:`webapp.experiments.seed_pairs.seed_pair_result`:
    each other arm − the baseline per pair, and pooled over the pairs with the two-level interval)."""
    spec = ExperimentSpec.from_json(experiment.spec)
    links = _links(experiment)
    result: dict[str, Any] = {
        "rows": _table_rows(spec, links),
        "differences": _differences(spec, links),
        "resamples": spec.resamples,
        "confidence": DEFAULT_CONFIDENCE,
        "judge": spec.judge.label,
        "baseline": spec.baseline,
        "arms": [
            {"name": arm.name, "method": arm.method, "params": arm.params} for arm in spec.ordered_arms()
        ],
    }
    if spec.seeds > 1:
        from webapp.experiments.seed_pairs import seed_pair_result

        trained = {
            (arm.name, seed): run
            for arm in spec.arms
            for seed in spec.seed_list
            if (run := _finished_run(links, _trained(arm, seed))) is not None
        }
        result.update(seeds=list(spec.seed_list), **seed_pair_result(spec, trained))
    return result


def experiment_compare_query(*, experiment: Experiment) -> str:
    """The compare page's query of the experiment's evaluations: A = the trained baseline arm, B = the first other
    trained arm (or the baseline's start), of the first seed pair; every evaluation in ``runs``."""
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
    base = links.get(_trained(baseline, spec.seed))
    other = next(
        (links[_trained(arm, spec.seed)] for arm in spec.others if _trained(arm, spec.seed) in links), None
    )
    start = links.get(_start(spec, baseline.method))
    a = base.run_id if base is not None else evals[0]
    b = (
        other.run_id
        if other is not None
        else (start.run_id if start is not None and start.run_id != a else evals[1])
    )
    if a == b:
        b = next(pk for pk in evals if pk != a)
    return urlencode({"a": a, "b": b, "runs": ",".join(str(pk) for pk in evals)})
