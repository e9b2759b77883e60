"""Audit pages. Annotators: their queues and the annotation workspace (under /audits/queue/, the only prefix
the annotator middleware lets them open). Researchers and admins: the audit list, setup, report, lifecycle,
adjudication and export."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from webapp.accounts.selectors import user_is_researcher
from webapp.audits import adjudication, export, report, selectors, services, strata
from webapp.audits.forms import AdjudicationForm, AuditForm, LabelForm
from webapp.audits.models import Audit, AuditItem, FrozenReport
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
                oversample=data.get("oversample") or 1.0,
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


def _audit_or_404(audit_id: int) -> Audit:
    try:
        return selectors.audit_get(audit_id=audit_id)
    except Audit.DoesNotExist:
        raise Http404(f"No audit {audit_id}") from None


@researcher_required
def audit_report(request: HttpRequest, audit_id: int) -> HttpResponse:
    """A closed audit shows the report frozen when it was closed; any other, the report computed now."""
    audit = _audit_or_404(audit_id)
    frozen = selectors.frozen_report_latest(audit=audit) if audit.status == Audit.Status.CLOSED else None
    if frozen is not None:
        return frozen_report(request, frozen.pk)
    context = {
        "report": report.audit_report(audit=audit),
        "strata": strata.strata_report(audit=audit),
        "n_resamples": report.N_RESAMPLES,
        "frozen_reports": audit.frozen_reports.all(),
        "tables": export.TABLES,
    }
    return render(request, "audits/report.html", context)


@researcher_required
def frozen_report(request: HttpRequest, report_id: int) -> HttpResponse:
    """A report frozen at closing, by its id: what a paper cites. Rendered from the stored JSON only."""
    try:
        frozen = selectors.frozen_report_get(report_id=report_id)
    except FrozenReport.DoesNotExist:
        raise Http404(f"No frozen audit report {report_id}") from None
    is_latest = selectors.frozen_report_latest(audit=frozen.audit) == frozen
    # Strata, weights and drift are computed from the items and labels, which cannot change while the audit stays
    # closed: shown under its latest frozen report only.
    closed = frozen.audit.status == Audit.Status.CLOSED
    context = {
        "frozen": frozen,
        "audit": frozen.audit,
        "data": frozen.report,
        "is_latest": is_latest,
        "tables": export.TABLES,
        "strata": strata.strata_report(audit=frozen.audit) if is_latest and closed else None,
    }
    return render(request, "audits/report_frozen.html", context)


@researcher_required
@require_POST
def audit_status(request: HttpRequest, audit_id: int) -> HttpResponse:
    """Pause, resume, close (freezing the report) or reopen, from the report page's buttons."""
    audit = _audit_or_404(audit_id)
    try:
        frozen = services.audit_transition(
            audit=audit, action=request.POST.get("action", ""), by=request.user
        )
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        messages.info(request, f"Audit {audit.pk} is now {audit.status}.")
        if frozen is not None:
            return redirect("audits:frozen_report", frozen.pk)
    return redirect("audits:report", audit.pk)


@researcher_required
def adjudicate(request: HttpRequest, audit_id: int) -> HttpResponse:
    audit = _audit_or_404(audit_id)
    context = {
        "audit": audit,
        "queue": adjudication.adjudication_queue(audit=audit),
        "read_only": audit.status == Audit.Status.CLOSED,
    }
    return render(request, "audits/adjudicate.html", context)


@researcher_required
@require_POST
def adjudication_post(request: HttpRequest, audit_id: int, step_id: int) -> HttpResponse:
    """Set a step's final label (an htmx post); an empty label removes the adjudication."""
    audit = _audit_or_404(audit_id)
    form = AdjudicationForm(request.POST)
    saved, error = None, ""
    if form.is_valid():
        data = form.cleaned_data
        try:
            if data["label"]:
                saved = services.adjudication_save(
                    audit=audit,
                    step_id=step_id,
                    label=data["label"],
                    comment=data["comment"],
                    adjudicator=request.user,
                )
            else:
                services.adjudication_delete(audit=audit, step_id=step_id)
        except ValidationError as exc:
            error = "; ".join(exc.messages)
    else:
        error = form.errors.as_text()
    context = {"adjudication": saved, "error": error, "removed": not error and saved is None}
    return render(request, "audits/_adjudication.html", context, status=400 if error else 200)


@researcher_required
def export_jsonl(request: HttpRequest, audit_id: int) -> HttpResponse:
    audit = _audit_or_404(audit_id)
    response = HttpResponse(export.as_jsonl(audit), content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{audit.pk}.jsonl"'
    return response


@researcher_required
def export_csv(request: HttpRequest, audit_id: int, table: str) -> HttpResponse:
    audit = _audit_or_404(audit_id)
    if table not in export.TABLES:
        raise Http404(f"No export table {table!r}: one of {', '.join(export.TABLES)}")
    response = HttpResponse(export.as_csv(audit, table), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{audit.pk}-{table}.csv"'
    return response


def queue(request: HttpRequest) -> HttpResponse:
    return render(request, "audits/queue.html", {"audits": selectors.audit_queue(annotator=request.user)})


def audit_items(request: HttpRequest, audit_id: int) -> HttpResponse:
    items = selectors.audit_items(audit_id=audit_id, annotator=request.user)
    context = {
        "items": items,
        "audit_id": audit_id,
        "progress": selectors.my_progress(audit_id=audit_id, annotator=request.user),
        "resume": selectors.resume_item(audit_id=audit_id, annotator=request.user),
    }
    return render(request, "audits/audit_items.html", context)


def resume(request: HttpRequest, audit_id: int) -> HttpResponse:
    """Back where the annotator left off: their first trajectory with a step still unlabelled."""
    item_id = selectors.resume_item(audit_id=audit_id, annotator=request.user)
    if item_id is None:
        raise Http404(f"Nothing of audit {audit_id} is in your queue")
    return redirect("audits:item", item_id)


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
        "progress": selectors.my_progress(audit_id=item.audit_id, annotator=request.user),
        "writable": item.audit.status == Audit.Status.OPEN,
    }
    return render(request, "audits/item.html", context)


@require_POST
def label_post(request: HttpRequest, item_id: int) -> HttpResponse:
    """Save one step's label (an htmx post, CSRF-checked); answers with the step's label fragment."""
    try:
        item = selectors.item_for_label(item_id=item_id, annotator=request.user)
    except AuditItem.DoesNotExist:
        raise Http404("No such item in your queues") from None
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
    # No request in the render: the fragment needs none of the context processors, and this runs on every key.
    body = render_to_string("audits/_label.html", {"label": saved, "error": error})
    return HttpResponse(body, status=200 if saved else 400)
