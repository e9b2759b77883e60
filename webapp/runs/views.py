"""HTML pages on runs: the dashboard and the run page."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from webapp.runs import selectors, services
from webapp.runs.models import Run
from webapp.trajectories.selectors import trajectory_list


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/home.html", {"runs": selectors.run_list()[:100]})


def _run_or_404(run_id: int) -> Run:
    try:
        return selectors.run_get(run_id=run_id)
    except Run.DoesNotExist:
        raise Http404("No such run") from None


def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(run_id)
    context = {
        "run": run,
        "metrics": sorted(selectors.metric_latest(run_id=run.pk).items()),
        "trajectories": trajectory_list(run_id=run.pk)[:20],
    }
    return render(request, "runs/run_detail.html", context)


def run_status(request: HttpRequest, run_id: int) -> HttpResponse:
    """The status fragment the run page polls with htmx while the run is active."""
    return render(request, "runs/_run_status.html", {"run": _run_or_404(run_id)})


@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    _run_or_404(run_id)
    return render(request, "runs/_run_status.html", {"run": services.run_cancel(run_id=run_id)})
