"""Audit pages. Annotators: their queues and the annotation workspace (under /audits/queue/, the only prefix
the annotator middleware lets them open). Researchers and admins: the audit list, setup and report."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.accounts.selectors import user_is_researcher
from webapp.audits import report, selectors, services
from webapp.audits.forms import AuditForm, LabelForm
from webapp.audits.models import Audit, AuditItem
from webapp.audits.services import LABELS_BY_KIND
from webapp.trajectories.models import Step

View = Callable[..., HttpResponse]


def researcher_required(view: View) -> View:
    """403 for annotators even if the middleware's prefix rule were loosened: audits' results are not theirs."""

    @wraps(view)
    def checked(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if not user_is_researcher(user=request.user):
            raise PermissionDenied("Audit setup and reports are for researchers and admins.")
        return view(request, *args, **kwargs)

    return checked


@researcher_required
def audit_list(request: HttpRequest) -> HttpResponse:
    return render(request, "audits/audit_list.html", {"audits": selectors.audit_list()[:200]})


@researcher_required
def audit_new(request: HttpRequest) -> HttpResponse:
    form = AuditForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            audit = services.audit_create(
                name=data["name"],
                run_ids=[run.pk for run in data["runs"]],
                sample_size=data["sample_size"],
                seed=data["seed"],
                stratification=data["stratification"],
                annotators=list(data["annotators"]),
                annotators_per_item=data["annotators_per_item"],
                guidelines=data["guidelines"],
                blind=data["blind"],
                created_by=request.user,
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect("audits:report", audit.pk)
    return render(request, "audits/audit_new.html", {"form": form}, status=400 if form.errors else 200)


@researcher_required
def audit_report(request: HttpRequest, audit_id: int) -> HttpResponse:
    try:
        audit = selectors.audit_get(audit_id=audit_id)
    except Audit.DoesNotExist:
        raise Http404("No such audit") from None
    context = {"report": report.audit_report(audit=audit), "n_resamples": report.N_RESAMPLES}
    return render(request, "audits/report.html", context)


def queue(request: HttpRequest) -> HttpResponse:
    return render(request, "audits/queue.html", {"audits": selectors.audit_queue(annotator=request.user)})


def audit_items(request: HttpRequest, audit_id: int) -> HttpResponse:
    items = selectors.audit_items(audit_id=audit_id, annotator=request.user)
    return render(request, "audits/audit_items.html", {"items": items, "audit_id": audit_id})


def _item_or_404(request: HttpRequest, item_id: int) -> AuditItem:
    try:
        return selectors.audit_item_get(item_id=item_id, annotator=request.user)
    except AuditItem.DoesNotExist:
        raise Http404("No such item in your queues") from None


def item_workspace(request: HttpRequest, item_id: int) -> HttpResponse:
    """One trajectory to label. Blind audits show no verdict, reward or judge text of any kind."""
    item = _item_or_404(request, item_id)
    labels = selectors.labels_by_step(item=item, annotator=request.user)
    steps = [
        (step, labels.get(step.pk), [(value, value.label) for value in LABELS_BY_KIND[Step.Kind(step.kind)]])
        for step in item.trajectory.steps.all()
    ]
    previous, following = selectors.item_neighbours(item=item, annotator=request.user)
    context = {
        "item": item,
        "steps": steps,
        "blind": item.audit.blind,
        "previous": previous,
        "next": following,
    }
    return render(request, "audits/item.html", context)


@require_POST
def label_post(request: HttpRequest, item_id: int) -> HttpResponse:
    """Save one step's label (an htmx post, CSRF-checked); answers with the step's label fragment."""
    item = _item_or_404(request, item_id)
    form = LabelForm(request.POST)
    error = ""
    saved = None
    if form.is_valid():
        try:
            saved = services.label_save(
                item=item,
                annotator=request.user,
                step_id=form.cleaned_data["step"],
                label=form.cleaned_data["label"],
                comment=form.cleaned_data["comment"],
                seconds_spent=form.cleaned_data["seconds_spent"],
            )
        except ValidationError as exc:
            error = "; ".join(exc.messages)
    else:
        error = form.errors.as_text()
    context = {"item": item, "step_id": form.data.get("step"), "label": saved, "error": error}
    return render(request, "audits/_label.html", context, status=200 if saved else 400)
