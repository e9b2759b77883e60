"""Writes on audits: sampling the trajectories to audit, and saving annotators' labels."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef

from webapp.audits.models import Audit, AuditItem, Label
from webapp.audits.sampling import SampleTooLarge, round_robin, sample_ids
from webapp.trajectories.models import Step, Trajectory

# The step questions of the audit (HiPRAG §3.2): a search step is over-search when it was unnecessary; a
# non-search step is under-search when it is wrong (the agent should have searched). "unsure" fits both.
LABELS_BY_KIND = {
    Step.Kind.SEARCH: (Label.Value.NECESSARY, Label.Value.UNNECESSARY, Label.Value.UNSURE),
    Step.Kind.NON_SEARCH: (
        Label.Value.CORRECT,
        Label.Value.SHOULD_SEARCH,
        Label.Value.INCORRECT,
        Label.Value.UNSURE,
    ),
}
# What each stratification groups trajectories by.
STRATUM_FIELDS = {Audit.Stratification.DATASET: "dataset_id", Audit.Stratification.CORRECTNESS: "exact_match"}


def _candidates(run_ids: Sequence[int], stratification: str) -> list[tuple[int, Hashable]]:
    """The runs' trajectories that have steps to label (a trajectory that failed to parse has none)."""
    field = STRATUM_FIELDS.get(Audit.Stratification(stratification))
    rows = Trajectory.objects.filter(run_id__in=run_ids).filter(
        Exists(Step.objects.filter(trajectory=OuterRef("pk")))
    )
    if field is None:
        return [(id_, None) for id_ in rows.values_list("id", flat=True)]
    return list(rows.values_list("id", field))


@transaction.atomic
def audit_create(
    *,
    name: str,
    run_ids: Sequence[int],
    sample_size: int,
    seed: int = 0,
    stratification: str = Audit.Stratification.NONE,
    annotators: Sequence[AbstractBaseUser] = (),
    annotators_per_item: int = 1,
    guidelines: str = "",
    blind: bool = True,
    created_by: AbstractBaseUser | None = None,
) -> Audit:
    """Sample ``sample_size`` trajectories of the runs with ``seed`` and assign each to ``annotators_per_item``
    annotators (round-robin over the annotators sorted by id).

    Reproducible: the same runs, size, seed and stratification give the same items in the same order. With no
    annotators the items are left unassigned (an admin can assign them later).
    """
    if sample_size < 1:
        raise ValidationError({"sample_size": "the sample needs at least one trajectory"})
    if annotators and annotators_per_item > len(annotators):
        raise ValidationError(
            {
                "annotators_per_item": f"{annotators_per_item} annotators per item, but only "
                f"{len(annotators)} annotators were chosen"
            }
        )
    try:
        chosen = sample_ids(
            _candidates(run_ids, stratification),
            sample_size,
            seed=seed,
            stratified=bool(stratification),
        )
    except SampleTooLarge as exc:
        raise ValidationError(
            {
                "sample_size": f"The chosen runs hold only {exc.available} trajectories with steps to label, "
                f"fewer than the sample of {exc.wanted}: lower the sample size or add runs."
            }
        ) from None
    audit = Audit.objects.create(
        name=name,
        sample_size=sample_size,
        seed=seed,
        stratification=stratification,
        annotators_per_item=annotators_per_item,
        guidelines=guidelines,
        blind=blind,
        created_by=created_by,
    )
    audit.source_runs.set(run_ids)
    people = sorted(annotators, key=lambda user: user.pk)
    audit.annotators.set(people)
    items = AuditItem.objects.bulk_create(
        AuditItem(audit=audit, trajectory_id=trajectory_id, position=position)
        for position, trajectory_id in enumerate(chosen)
    )
    Assignment = AuditItem.assignees.through
    Assignment.objects.bulk_create(
        Assignment(audititem_id=item.pk, user_id=person.pk)
        for item, assigned in zip(items, round_robin(people, len(items), annotators_per_item), strict=True)
        for person in assigned
    )
    return audit


@transaction.atomic
def label_save(
    *,
    item: AuditItem,
    annotator: AbstractBaseUser,
    step_id: int | None,
    label: str,
    comment: str = "",
    seconds_spent: int | None = None,
) -> Label:
    """Create or replace an annotator's label on a step of an audit item (or on the trajectory, ``step_id=None``).

    ``seconds_spent`` is the time since the annotator's previous save on the page; re-labelling a step adds to
    the time already recorded, so a label's time is all the time its step took.
    """
    if not item.assignees.filter(pk=annotator.pk).exists():
        raise PermissionDenied("this item is not assigned to you")
    if item.audit.status != Audit.Status.OPEN:
        raise ValidationError("the audit is closed")
    if label not in Label.Value.values:
        raise ValidationError(f"unknown label {label!r}")
    if step_id is not None:
        kind = item.trajectory.steps.filter(pk=step_id).values_list("kind", flat=True).first()
        if kind is None:
            raise ValidationError("the step is not part of this trajectory")
        if label not in LABELS_BY_KIND[Step.Kind(kind)]:
            raise ValidationError(
                f"{label!r} does not answer the question of a {kind.replace('_', '-')} step"
            )
    existing = (
        Label.objects.select_for_update().filter(item=item, step_id=step_id, annotator=annotator).first()
    )
    if existing is None:
        return Label.objects.create(
            item=item,
            step_id=step_id,
            annotator=annotator,
            label=label,
            comment=comment,
            seconds_spent=seconds_spent,
        )
    existing.label = label
    existing.comment = comment
    if seconds_spent is not None:
        existing.seconds_spent = (existing.seconds_spent or 0) + seconds_spent
    existing.save(update_fields=["label", "comment", "seconds_spent", "updated_at"])
    return existing
