from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from webapp.imports.forms import ImportForm
from webapp.imports.selectors import import_job_list
from webapp.imports.services import import_job_create


def import_page(request: HttpRequest) -> HttpResponse:
    """Upload a corpus, dataset or trajectory file; a worker imports it and the job list shows the outcome."""
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        run, index = form.cleaned_data["run"], form.cleaned_data["index"]
        import_job_create(
            kind=form.cleaned_data["kind"],
            upload=form.cleaned_data["file"],
            name=form.cleaned_data["name"],
            options={
                "run_id": run.pk if run else None,
                "dataset": form.cleaned_data["dataset"],
                "index_id": index.pk if index else None,
            },
            created_by=request.user,
        )
        return redirect("imports:page")
    return render(request, "imports/import_page.html", {"form": form, "jobs": import_job_list()})


def import_jobs(request: HttpRequest) -> HttpResponse:
    return render(request, "imports/_jobs.html", {"jobs": import_job_list()})
