"""Reads on audits."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet

from webapp.audits.models import Audit, AuditItem, Label


def audit_queue(*, annotator: AbstractBaseUser) -> QuerySet[Audit]:
    """The open audits with items assigned to the annotator, with how many of those the annotator has touched."""
    mine = Q(items__assignees=annotator)
    return (
        Audit.objects.filter(annotators=annotator, status=Audit.Status.OPEN)
        .annotate(
            n_items=Count("items", filter=mine, distinct=True),
            n_done=Count("items", filter=mine & Q(items__labels__annotator=annotator), distinct=True),
        )
        .order_by("-created_at")
    )


def audit_items(*, audit_id: int, annotator: AbstractBaseUser) -> QuerySet[AuditItem]:
    """The annotator's items of an audit, with how many of each item's steps they labelled."""
    return (
        AuditItem.objects.filter(audit_id=audit_id, assignees=annotator, audit__status=Audit.Status.OPEN)
        .select_related("trajectory")
        .annotate(n_labels=Count("labels", filter=Q(labels__annotator=annotator, labels__step__isnull=False)))
        .order_by("position")
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


def labels_by_step(*, item: AuditItem, annotator: AbstractBaseUser) -> dict[int | None, Label]:
    return {label.step_id: label for label in Label.objects.filter(item=item, annotator=annotator)}
