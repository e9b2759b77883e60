"""Reads on audits."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, F, Q, QuerySet

from webapp.audits.models import Audit, AuditItem, FrozenReport, Label
from webapp.trajectories.models import Step

# Audits an annotator still sees in the queue (a paused one says so; a closed one is gone).
QUEUED = (Audit.Status.OPEN, Audit.Status.PAUSED)


def audit_queue(*, annotator: AbstractBaseUser) -> QuerySet[Audit]:
    """The open and paused audits with items assigned to the annotator, with how many of those the annotator has
    touched."""
    mine = Q(items__assignees=annotator)
    return (
        Audit.objects.filter(annotators=annotator, status__in=QUEUED)
        .annotate(
            n_items=Count("items", filter=mine, distinct=True),
            n_done=Count("items", filter=mine & Q(items__labels__annotator=annotator), distinct=True),
        )
        .order_by("-created_at")
    )


def audit_items(*, audit_id: int, annotator: AbstractBaseUser) -> QuerySet[AuditItem]:
    """The annotator's items of an audit, with how many of each item's steps they labelled."""
    return (
        AuditItem.objects.filter(audit_id=audit_id, assignees=annotator, audit__status__in=QUEUED)
        .select_related("trajectory")
        .annotate(
            n_labels=Count(
                "labels", filter=Q(labels__annotator=annotator, labels__step__isnull=False), distinct=True
            ),
            n_steps=Count("trajectory__steps", distinct=True),
        )
        .order_by("position")
    )


def resume_item(*, audit_id: int, annotator: AbstractBaseUser) -> int | None:
    """Where the annotator left off: their first item (in queue order) with a step they have not labelled; the
    last item when everything is labelled, ``None`` when they have no item in the audit."""
    items = list(audit_items(audit_id=audit_id, annotator=annotator).values_list("pk", "n_labels", "n_steps"))
    for pk, n_labels, n_steps in items:
        if n_labels < n_steps:
            return pk
    return items[-1][0] if items else None


@dataclass(frozen=True)
class MyProgress:
    n_items: int
    n_items_done: int
    n_steps: int
    n_labelled: int


def my_progress(*, audit_id: int, annotator: AbstractBaseUser) -> MyProgress:
    """The annotator's own progress in an audit, shown on every workspace page."""
    counts = list(audit_items(audit_id=audit_id, annotator=annotator).values_list("n_labels", "n_steps"))
    return MyProgress(
        n_items=len(counts),
        n_items_done=sum(1 for done, total in counts if total and done >= total),
        n_steps=sum(total for _, total in counts),
        n_labelled=sum(done for done, _ in counts),
    )


def item_for_label(*, item_id: int, annotator: AbstractBaseUser) -> AuditItem:
    """An item assigned to the annotator, without its steps: all a label save needs (it runs on every key)."""
    return AuditItem.objects.only("id", "audit_id", "trajectory_id", "position").get(
        pk=item_id, assignees=annotator
    )


def audit_item_get(*, item_id: int, annotator: AbstractBaseUser) -> AuditItem:
    """An item assigned to the annotator (``DoesNotExist`` otherwise: nobody sees others' queues)."""
    return (
        AuditItem.objects.select_related("audit", "trajectory")
        .prefetch_related("trajectory__steps__verdicts")
        .get(pk=item_id, assignees=annotator)
    )


def item_neighbours(*, item: AuditItem, annotator: AbstractBaseUser) -> tuple[int | None, int | None]:
    """The annotator's previous and next item ids in queue order, for keyboard navigation."""
    mine = AuditItem.objects.filter(audit_id=item.audit_id, assignees=annotator)
    previous = (
        mine.filter(position__lt=item.position).order_by("-position").values_list("pk", flat=True).first()
    )
    following = (
        mine.filter(position__gt=item.position).order_by("position").values_list("pk", flat=True).first()
    )
    return previous, following


def audit_list() -> QuerySet[Audit]:
    """Every audit, newest first, with its size and label count (the researchers' list)."""
    return (
        Audit.objects.prefetch_related("source_runs")
        .annotate(
            n_items=Count("items", distinct=True),
            n_labels=Count("items__labels", filter=Q(items__labels__step__isnull=False), distinct=True),
        )
        .order_by("-created_at", "-pk")
    )


def audit_get(*, audit_id: int) -> Audit:
    return Audit.objects.prefetch_related("source_runs", "annotators").get(pk=audit_id)


def frozen_report_latest(*, audit: Audit) -> FrozenReport | None:
    """The report frozen when the audit was last closed (``None`` for an audit never closed)."""
    return audit.frozen_reports.order_by("-created_at", "-pk").first()


def frozen_report_get(*, report_id: int) -> FrozenReport:
    return FrozenReport.objects.select_related("audit", "closed_by").get(pk=report_id)


def steps_by_id(*, step_ids: list[int]) -> dict[int, Step]:
    """Steps with their trajectory's question, for the adjudication page."""
    rows = (
        Step.objects.filter(pk__in=step_ids)
        .select_related("trajectory")
        .annotate(question=F("trajectory__question_text"))
    )
    return {step.pk: step for step in rows}


def labels_with_annotators(*, audit_id: int, step_ids: list[int]) -> dict[int, list[Label]]:
    """Each step's labels (with the annotator's name and comment), annotators in name order."""
    rows = (
        Label.objects.filter(item__audit_id=audit_id, step_id__in=step_ids)
        .select_related("annotator")
        .order_by("annotator__username")
    )
    found: dict[int, list[Label]] = {}
    for label in rows:
        found.setdefault(label.step_id, []).append(label)
    return found


def labels_by_step(*, item: AuditItem, annotator: AbstractBaseUser) -> dict[int | None, Label]:
    return {label.step_id: label for label in Label.objects.filter(item=item, annotator=annotator)}
