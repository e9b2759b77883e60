"""HTML pages on runs: the dashboard and the run page (live curves, status, stop, log tail, trajectories)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from webapp.runs import hooks, selectors, services
from webapp.runs.models import Run
from webapp.runs.queue_wait import queue_wait, queue_waits


def home(request: HttpRequest) -> HttpResponse:
    runs = list(selectors.run_list()[:100])
    headlines = selectors.run_headlines(run_ids=[run.pk for run in runs])
    waits = queue_waits(runs=runs)
    rows = [(run, selectors.headline_cells(headlines.get(run.pk, {})), waits.get(run.pk)) for run in runs]
    context = {"rows": rows, "headline_columns": selectors.HEADLINE_COLUMNS}
    return render(request, "runs/home.html", context)


def _run_or_404(run_id: int) -> Run:
    try:
        return selectors.run_get(run_id=run_id)
    except Run.DoesNotExist:
        raise Http404("No such run") from None


def _checked_run(run_id: int) -> Run:
    """The run, after marking it crashed if it is a train run whose supervisor stopped beating."""
    run = _run_or_404(run_id)
    supervisor = hooks.supervisor_for(run.kind)
    if supervisor and run.status == Run.Status.RUNNING and supervisor.mark_crashed(run_id=run.pk):
        run = _run_or_404(run_id)
    return run


def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _checked_run(run_id)
    context = {
        "run": run,
        "queue_wait": queue_wait(run=run),
        "metrics": sorted(selectors.metric_latest(run_id=run.pk).items()),
        "overlay_runs": selectors.overlay_candidates(run=run),
        "flat_steps": selectors.steps_without_spread(run_id=run.pk),
        "run_panels": hooks.run_panels(run),  # the upper apps' sections: evaluation report, audit drift
        "run_facts": hooks.run_panels(run, "facts"),  # and facts: the trainer's executor
        **hooks.run_parts(run),  # the upper apps' parts: trajectories
    }
    return render(request, "runs/run_detail.html", context)


def run_status(request: HttpRequest, run_id: int) -> HttpResponse:
    """The status fragment the run page polls with htmx while the run is active."""
    run = _checked_run(run_id)
    return render(request, "runs/_run_status.html", {"run": run, "queue_wait": queue_wait(run=run)})


def run_trajectories(request: HttpRequest, run_id: int) -> HttpResponse:
    """The newest trajectories, polled while the run is active."""
    run = _run_or_404(run_id)
    return render(
        request,
        "runs/_run_trajectories.html",
        {"run": run, **hooks.run_parts(run, ["trajectories"])},
    )


@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(run_id)
    if supervisor := hooks.supervisor_for(run.kind):
        # The supervisor stops the trainer (signal, grace period, kill) and records the final status.
        run = supervisor.stop(run_id=run_id)
    else:
        run = services.run_cancel(run_id=run_id)
    return render(request, "runs/_run_status.html", {"run": _run_or_404(run.pk)})
