"""Writes on audits: sampling the trajectories to audit, and saving annotators' labels."""

from __future__ import annotations

import random
from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from webapp.audits.models import Audit, AuditItem, Label
from webapp.trajectories.models import Trajectory


@transaction.atomic
def audit_create(
    *,
    name: str,
    run_ids: Sequence[int],
    sample_size: int,
    seed: int = 0,
    annotators: Sequence[AbstractBaseUser] = (),
    guidelines: str = "",
    blind: bool = True,
    created_by: AbstractBaseUser | None = None,
) -> Audit:
    """Sample ``sample_size`` trajectories of the runs uniformly with ``seed`` (reproducible: ids are sorted first)."""
    candidates = sorted(Trajectory.objects.filter(run_id__in=run_ids).values_list("id", flat=True))
    if len(candidates) < sample_size:
        raise ValidationError(
            f"the runs hold {len(candidates)} trajectories, fewer than the sample of {sample_size}"
        )
    chosen = random.Random(seed).sample(candidates, sample_size)
    audit = Audit.objects.create(
        name=name,
        sample_size=sample_size,
        seed=seed,
        guidelines=guidelines,
        blind=blind,
        created_by=created_by,
    )
    audit.source_runs.set(run_ids)
    audit.annotators.set(annotators)
    AuditItem.objects.bulk_create(
        AuditItem(audit=audit, trajectory_id=trajectory_id, position=position)
        for position, trajectory_id in enumerate(chosen)
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
    """Create or replace an annotator's label on a step of an audit item (or on the trajectory, ``step_id=None``)."""
    if not item.audit.annotators.filter(pk=annotator.pk).exists():
        raise PermissionDenied("not an annotator of this audit")
    if step_id is not None and not item.trajectory.steps.filter(pk=step_id).exists():
        raise ValidationError("the step is not part of this trajectory")
    if label not in Label.Value.values:
        raise ValidationError(f"unknown label {label!r}")
    saved, _ = Label.objects.update_or_create(
        item=item,
        step_id=step_id,
        annotator=annotator,
        defaults={"label": label, "comment": comment, "seconds_spent": seconds_spent},
    )
    return saved
