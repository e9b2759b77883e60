"""The annotators' pages: their audit queues and the annotation workspace (all under /audits/queue/)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from webapp.audits import selectors, services
from webapp.audits.forms import LabelForm
from webapp.audits.models import AuditItem, Label


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
    item = _item_or_404(request, item_id)
    labels = selectors.labels_by_step(item=item, annotator=request.user)
    steps = [(step, labels.get(step.pk)) for step in item.trajectory.steps.all()]
    return render(
        request,
        "audits/item.html",
        {"item": item, "steps": steps, "choices": Label.Value.choices},
    )


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
