"""Reads on audits."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet

from webapp.audits.models import Audit, AuditItem, Label


def audit_queue(*, annotator: AbstractBaseUser) -> QuerySet[Audit]:
    """The open audits an annotator is assigned to, with how many of their items the annotator has labelled."""
    return (
        Audit.objects.filter(annotators=annotator, status=Audit.Status.OPEN)
        .annotate(
            n_items=Count("items", distinct=True),
            n_done=Count("items", filter=Q(items__labels__annotator=annotator), distinct=True),
        )
        .order_by("-created_at")
    )


def audit_items(*, audit_id: int, annotator: AbstractBaseUser) -> QuerySet[AuditItem]:
    return (
        AuditItem.objects.filter(audit_id=audit_id, audit__annotators=annotator)
        .select_related("trajectory")
        .annotate(n_labels=Count("labels", filter=Q(labels__annotator=annotator)))
        .order_by("position")
    )


def audit_item_get(*, item_id: int, annotator: AbstractBaseUser) -> AuditItem:
    """An item of one of the annotator's audits (``DoesNotExist`` otherwise: nobody sees others' queues)."""
    return (
        AuditItem.objects.select_related("audit", "trajectory")
        .prefetch_related("trajectory__steps")
        .get(pk=item_id, audit__annotators=annotator)
    )


def labels_by_step(*, item: AuditItem, annotator: AbstractBaseUser) -> dict[int | None, Label]:
    return {label.step_id: label for label in Label.objects.filter(item=item, annotator=annotator)}
