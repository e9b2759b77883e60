"""How far an audit's labelling is: per annotator (assigned items and steps, labelled, time spent) and overall
(an item is complete when each of its assignees labelled each of its steps). Step labels only."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q, Sum

from webapp.audits.models import Audit, AuditItem, Label


@dataclass(frozen=True)
class AnnotatorProgress:
    username: str
    n_items: int
    n_items_done: int  # every step labelled
    n_steps: int
    n_labelled: int
    seconds: int


@dataclass(frozen=True)
class OverallProgress:
    """Every assignment at once: an item is complete when each of its assignees labelled each of its steps."""

    n_items: int
    n_items_complete: int
    n_labels: int  # step labels saved
    n_labels_needed: int  # Σ over items of steps × assignees

    @property
    def percent(self) -> float:
        return 100 * self.n_labels / self.n_labels_needed if self.n_labels_needed else 0.0


def annotator_progress(*, audit: Audit) -> tuple[AnnotatorProgress, ...]:
    """Per annotator: assigned items and steps, and how many they labelled (step labels only)."""
    rows = []
    for user in audit.annotators.order_by("username"):
        items = AuditItem.objects.filter(audit=audit, assignees=user).annotate(
            n_steps=Count("trajectory__steps", distinct=True),
            n_labelled=Count(
                "labels", filter=Q(labels__annotator=user, labels__step__isnull=False), distinct=True
            ),
        )
        counts = [(item.n_steps, item.n_labelled) for item in items]
        seconds = Label.objects.filter(item__audit=audit, annotator=user).aggregate(
            total=Sum("seconds_spent")
        )
        rows.append(
            AnnotatorProgress(
                username=user.get_username(),
                n_items=len(counts),
                n_items_done=sum(1 for total, done in counts if total and done >= total),
                n_steps=sum(total for total, _ in counts),
                n_labelled=sum(done for _, done in counts),
                seconds=seconds["total"] or 0,
            )
        )
    return tuple(rows)


def overall_progress(*, audit: Audit) -> OverallProgress:
    items = AuditItem.objects.filter(audit=audit).annotate(
        n_steps=Count("trajectory__steps", distinct=True),
        n_assignees=Count("assignees", distinct=True),
        n_labels=Count("labels", filter=Q(labels__step__isnull=False), distinct=True),
    )
    counts = [(item.n_steps * item.n_assignees, item.n_labels) for item in items]
    return OverallProgress(
        n_items=len(counts),
        n_items_complete=sum(1 for needed, done in counts if needed and done >= needed),
        n_labels=sum(done for _, done in counts),
        n_labels_needed=sum(needed for needed, _ in counts),
    )
