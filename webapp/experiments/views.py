"""HTML pages: the experiments and a form to start one, an experiment's stages and table, resume."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.audits import paired_correction
from webapp.evaluation.specs import EvaluationConfigError
from webapp.experiments import inputs, selectors, services
from webapp.experiments.forms import KNOB_FIELDS, ExperimentForm
from webapp.experiments.inputs import experiment_dir
from webapp.experiments.models import Experiment
from webapp.experiments.reporting import TITLES, delta_cell, interval_cell, pair_cell, value_cell
from webapp.experiments.runner_placement import runner_described
from webapp.experiments.specs import IMPORTED_FROM, SCREEN_FIELDS, ExperimentConfigError, ExperimentSpec

FIELD_FOR = {
    "train": "train_dataset",
    "eval": "eval_dataset",
    "questions": "train_dataset",
    "judge_model": "judge_model",
    "arm": "arms",
}


def _spec(form: ExperimentForm) -> ExperimentSpec:
    data = form.cleaned_data
    train = inputs.select_rows(
        inputs.dataset_rows(data["train_dataset"]),
        split=data["train_split"],
        limit=data["train_limit"],
        drop_guessable=data["train_drop_guessable"],
    )
    held_out = inputs.select_rows(
        inputs.dataset_rows(data["eval_dataset"]), split=data["eval_split"], limit=data["eval_limit"]
    )
    spec = ExperimentSpec.with_knobs(
        {name: data[name] for name in KNOB_FIELDS},
        arms=data["arm_list"],
        baseline=data["baseline"],
        model=inputs.resolve_model(data["model_path"].strip() or None),
        train_dataset_id=inputs.experiment_dataset(
            rows=train, label=inputs.train_label(data["train_drop_guessable"])
        ).pk,
        eval_dataset_id=inputs.experiment_dataset(rows=held_out, label="eval").pk,
        index_id=data["index"].pk,
        judge=form.judge_spec(),
        algorithm=data["algorithm"],
        eval_batch_size=data["eval_batch_size"],
        **{name: data[name] for name in SCREEN_FIELDS if data.get(name) is not None},
        eval_engine=data["eval_engine"],
        resamples=data["resamples"],
        executor=data["executor"],
        seeds=data["seeds"],
    )
    services.training_config_check(spec)
    return spec


def experiment_index(request: HttpRequest) -> HttpResponse:
    form = ExperimentForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            experiment = services.experiment_create(
                user=request.user,  # type: ignore[arg-type]
                spec=_spec(form),
                name=form.cleaned_data["name"],
            )
        except (ExperimentConfigError, EvaluationConfigError) as exc:
            field = exc.field if exc.field in form.fields else FIELD_FOR.get(exc.field.split("_")[0])
            form.add_error(field if field in form.fields else None, exc.message)
        else:
            return redirect("experiments:detail", experiment_id=experiment.pk)
    context = {"form": form, "experiments": selectors.experiment_list()[:100]}
    return render(request, "experiments/index.html", context, status=400 if form.errors else 200)


def _display(result: dict[str, Any]) -> dict[str, Any]:
    """The stored result with its cells formatted as the papers print them."""
    metrics = list(TITLES)
    rows = [{**row, "cells": [value_cell(row.get(m), m) for m in metrics]} for row in result.get("rows", [])]
    differences = [
        {
            **comparison,
            "cells": [
                {
                    "title": TITLES[d["metric"]],
                    "baseline": value_cell(d["baseline"], d["metric"]),
                    "method": value_cell(d["method"], d["metric"]),
                    "difference": delta_cell(d["difference"], d["metric"]),
                    "interval": interval_cell(d["low"], d["high"], d["metric"]),
                    "excludes_zero": d["excludes_zero"],
                }
                for d in comparison["metrics"]
            ],
        }
        for comparison in result.get("differences", [])
    ]
    return {
        "titles": [TITLES[m] for m in metrics],
        "rows": rows,
        "differences": differences,
        "seed_pairs": _seed_pairs_display(result),
    }


def _seed_pairs_display(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per other arm (with several seed pairs): its pairs' rows and the pooled row, cells formatted as the
    differences' (rates in percentage points)."""
    shown = []
    for pooled in result.get("pooled", []):
        pairs = [
            {**pair, "cells": [pair_cell(d) for d in pair["metrics"]]}
            for pair in result.get("pairs", [])
            if pair["arm"] == pooled["arm"]
        ]
        cells = [
            {
                "difference": pair_cell(d),
                "means": f"{value_cell(d['baseline'], d['metric'])} → {value_cell(d['method'], d['metric'])}",
                "excludes_zero": d["excludes_zero"],
                "same_sign": d["same_sign"],
            }
            for d in pooled["metrics"]
        ]
        shown.append({**pooled, "pair_rows": pairs, "cells": cells})
    return shown


def experiment_detail(request: HttpRequest, experiment_id: int) -> HttpResponse:
    experiment = Experiment.objects.filter(pk=experiment_id).select_related("created_by").first()
    if experiment is None:
        raise Http404("No such experiment")
    spec = ExperimentSpec.from_json(experiment.spec)
    result = experiment.result or {}
    context = {
        "experiment": experiment,
        "seed_titles": [TITLES[m] for m in result.get("pooled_metrics", [])],
        "spec": spec,
        "links": selectors.experiment_links(experiment_id=experiment.pk),
        "stages": services.experiment_stages(spec),
        "table": _display(experiment.result or {}),
        "corrected": paired_correction.experiment_corrections(result=experiment.result or {}),
        "confidence": round(100 * float((experiment.result or {}).get("confidence", 0.95))),
        "compare_query": selectors.experiment_compare_query(experiment=experiment),
        "imported_from": (experiment.spec or {}).get(IMPORTED_FROM, ""),
        "runner_where": runner_described(experiment_dir(experiment.pk)),
    }
    return render(request, "experiments/detail.html", context)


@require_POST
def experiment_resume(request: HttpRequest, experiment_id: int) -> HttpResponse:
    if not Experiment.objects.filter(pk=experiment_id).exists():
        raise Http404("No such experiment")
    try:
        services.experiment_resume_request(experiment_id=experiment_id)
    except ExperimentConfigError as exc:
        return HttpResponseBadRequest(exc.message)
    return redirect("experiments:detail", experiment_id=experiment_id)
