"""The new training run form, and revoking a run's ingest tokens from its page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from trainer.placement import Placement
from webapp.training.forms import TrainingRunForm, WarmStartForm
from webapp.training.services import training_run_create, warm_start_run_create


def training_run_new(request: HttpRequest) -> HttpResponse:
    form = TrainingRunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        cleaned = form.cleaned_data
        run = training_run_create(
            user=request.user,  # type: ignore[arg-type]
            name=cleaned["name"],
            config=form.run_config(output_dir="(the run's folder)"),
            dataset=cleaned.get("dataset"),
            index=cleaned.get("index"),
            executor=cleaned.get("executor") or Placement.LOCAL.value,
        )
        return redirect("runs:detail", run_id=run.pk)
    return render(request, "training/new_run.html", {"form": form}, status=400 if form.errors else 200)


def warm_start_new(request: HttpRequest) -> HttpResponse:
    form = WarmStartForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        cleaned = form.cleaned_data
        run = warm_start_run_create(
            user=request.user,  # type: ignore[arg-type]
            name=cleaned["name"],
            config=form.warm_start_config(output_dir="(the run's folder)", data_path="-"),
            dataset=cleaned["dataset"],
            index=cleaned["index"],
        )
        return redirect("runs:detail", run_id=run.pk)
    return render(request, "training/warm_start.html", {"form": form}, status=400 if form.errors else 200)


@require_POST
def ingest_tokens_revoke(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run page's "Revoke ingest tokens": every token issued for the run stops working (401); the status
    fragment comes back."""
    from webapp.runs.models import Run
    from webapp.training.reporting import tokens_revoke

    run = get_object_or_404(Run, pk=run_id)
    generation = tokens_revoke(run_id=run.pk)
    run.refresh_from_db()
    return render(request, "runs/_run_status.html", {"run": run, "tokens_revoked": generation})
