"""The new training run form."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

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
            executor=cleaned.get("executor") or "local",
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
