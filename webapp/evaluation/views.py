"""HTML pages: evaluation runs, the new-evaluation form, a run's report, and the compare page."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from webapp.audits import correction, paired_correction
from webapp.evaluation import compare as compare_selectors
from webapp.evaluation import rejudge, selectors, services
from webapp.evaluation.forms import CompareForm, EvaluationForm
from webapp.evaluation.reporting import COLUMNS, report_table
from webapp.runs.models import Run
from webapp.runs.selectors import run_get

COMPARE_PAGE_SIZE = 25


def evaluation_index(request: HttpRequest) -> HttpResponse:
    context = {"runs": selectors.evaluation_run_list()[:100], "compare_form": CompareForm()}
    return render(request, "evaluation/index.html", context)


def evaluation_new(request: HttpRequest) -> HttpResponse:
    form = EvaluationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        base_run = form.cleaned_data.get("base_run")
        run = services.evaluation_run_create(
            user=request.user,
            spec=form.spec(),
            name=form.cleaned_data.get("name", ""),
            base_run_id=base_run.pk if base_run else None,
        )
        return redirect("runs:detail", run.pk)
    return render(request, "evaluation/new.html", {"form": form}, status=400 if form.errors else 200)


def report_context(run: Run) -> dict[str, object]:
    """What templates/evaluation/_report.html needs (``run`` plus these)."""
    return {
        "report_columns": COLUMNS,
        "report_rows": report_table(selectors.evaluation_report_rows(run_id=run.pk)),
        "report_stats": (stats := selectors.evaluation_stats_get(run_id=run.pk)),
        "judge_costs": rejudge.evaluation_judge_costs(stats.judge_stats if stats else {}),  # JudgePrice
        **correction.run_correction_context(run_id=run.pk),  # judge-corrected OSR/USR per version
    }


def evaluation_report_fragment(request: HttpRequest, run_id: int) -> HttpResponse:
    """The report section alone: the run page loads it with htmx, and it polls itself while the run is active."""
    try:
        run = run_get(run_id=run_id)
    except Run.DoesNotExist:
        raise Http404("No such run") from None
    if not run.is_active:
        services.evaluation_report_ensure(
            run_id=run.pk
        )  # an imported run's report, computed once from its trajectories
    return render(request, "evaluation/_report.html", {"run": run, **report_context(run)})


def evaluation_report(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        run = run_get(run_id=run_id)
    except Run.DoesNotExist:
        raise Http404("No such run") from None
    if not run.is_active:
        services.evaluation_report_ensure(run_id=run.pk)
    return render(request, "evaluation/report.html", {"run": run, **report_context(run)})


def compare(request: HttpRequest) -> HttpResponse:
    data = request.GET.copy()
    if "b" in data and "a" not in data:  # a run that names its baseline compares with it by default
        base = Run.objects.filter(pk=data["b"]).values_list("base_run_id", flat=True).first()
        if base is not None:
            data["a"] = str(base)
    form = CompareForm(data if "a" in data or "b" in data else None)
    context: dict[str, object] = {"form": form}
    if form.is_bound and form.is_valid():
        context.update(_comparison(request, form))
    return render(request, "evaluation/compare.html", context)


def _comparison(request: HttpRequest, form: CompareForm) -> dict[str, object]:
    run_a, run_b = form.cleaned_data["a"], form.cleaned_data["b"]
    metric = form.cleaned_data.get("metric") or "em"
    bucket = form.cleaned_data.get("bucket") or ""
    questions = compare_selectors.compare_questions(run_a_id=run_a.pk, run_b_id=run_b.pk, metric=metric)
    shown = [q for q in questions if q.bucket == bucket] if bucket in compare_selectors.BUCKETS else questions
    counts = compare_selectors.bucket_counts(questions)
    page = Paginator(shown, COMPARE_PAGE_SIZE).get_page(request.GET.get("page"))
    chosen_key = form.cleaned_data.get("q") or ""
    chosen = next((q for q in questions if q.key == chosen_key), None)
    more = ",".join(str(r.pk) for r in form.cleaned_data.get("runs") or [])
    base_query = urlencode(
        {"a": run_a.pk, "b": run_b.pk, "metric": metric, **({"runs": more} if more else {})}
    )
    return {
        "run_a": run_a,
        "run_b": run_b,
        "metric": metric,
        "bucket": bucket,
        "n_questions": len(questions),
        "bucket_tabs": [(key, label, counts[key]) for key, label in compare_selectors.BUCKETS.items()],
        "summary_a": compare_selectors.run_summary(
            run_id=run_a.pk, sides=[q.a for q in questions if q.a is not None]
        ),
        "summary_b": compare_selectors.run_summary(
            run_id=run_b.pk, sides=[q.b for q in questions if q.b is not None]
        ),
        "corrections_a": correction.run_corrections(run_id=run_a.pk),
        "corrections_b": correction.run_corrections(run_id=run_b.pk),
        "corrected_differences": paired_correction.corrected_differences(
            baseline_run_id=run_a.pk, run_id=run_b.pk
        ),
        "page": page,
        "chosen": chosen,
        "pair": compare_selectors.trajectory_pair(question=chosen) if chosen else None,
        "base_query": base_query,
        "list_query": f"{base_query}&{urlencode({'bucket': bucket})}" if bucket else base_query,
        **_many_runs(form, metric),
    }


def _many_runs(form: CompareForm, metric: str) -> dict[str, object]:
    """A, B and the ``runs`` list: each run's summary, its paired-bootstrap difference from A on the questions both
    answered, and the training curves (OSR, average searches per step) of the runs that were trained."""
    run_a, run_b = form.cleaned_data["a"], form.cleaned_data["b"]
    extra = [r for r in form.cleaned_data.get("runs") or [] if r.pk not in (run_a.pk, run_b.pk)]
    runs = [run_a, run_b, *extra]
    runs_param = ",".join(str(r.pk) for r in extra)
    rows = []
    for run in runs:
        sides = list(compare_selectors.latest_sides(run_id=run.pk, metric=metric).values())
        differences = (
            None
            if run.pk == run_a.pk
            else compare_selectors.paired_differences(baseline_run_id=run_a.pk, run_id=run.pk)
        )
        rows.append(
            {
                "run": run,
                "summary": compare_selectors.run_summary(run_id=run.pk, sides=sides),
                "differences": [
                    {
                        "metric": d.metric,
                        "cell": _delta(d.difference, d.metric),
                        "interval": f"[{_delta(d.low, d.metric)}, {_delta(d.high, d.metric)}]"
                        if d.low is not None and d.high is not None
                        else "—",
                        "excludes_zero": d.excludes_zero,
                    }
                    for d in differences.values()
                ]
                if differences
                else None,
                "n_pairs": next(iter(differences.values())).n_pairs if differences else None,
                "pair_query": urlencode(
                    {
                        "a": run_a.pk,
                        "b": run.pk,
                        "metric": metric,
                        **({"runs": runs_param} if runs_param else {}),
                    }
                )
                if run.pk != run_a.pk
                else "",
            }
        )
    return {
        "many_runs": rows,
        "difference_titles": [DIFFERENCE_TITLES[m] for m in DIFFERENCE_TITLES],
        "curves": compare_selectors.training_curves(runs),
        "runs_param": runs_param,
    }


DIFFERENCE_TITLES = {
    "cem": "ΔCEM",
    "acc": "Δacc (FlashRAG)",
    "em": "ΔEM",
    "f1": "ΔF1",
    "average_searches": "Δ#Search",
    "osr": "ΔOSR",
    "usr": "ΔUSR",
    "format_ok_rate": "ΔFormat",
}


def _delta(value: float | None, metric: str) -> str:
    """Percentage points for rates, searches as they are."""
    if value is None:
        return "—"
    return f"{value:+.2f}" if metric == "average_searches" else f"{100 * value:+.1f}"
