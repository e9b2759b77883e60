"""Writes on audits: sampling the trajectories to audit, saving annotators' labels, adjudicating steps, and the
audit's lifecycle (open, paused, closed with its report frozen, reopened)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from webapp.audits import report, report_data, strata
from webapp.audits.models import Adjudication, Audit, AuditItem, FrozenReport, Label
from webapp.audits.sampling import SampleTooLarge, round_robin, sample_ids, with_weights
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


def _label_locks(item: AuditItem, annotator: AbstractBaseUser, step_id: int | None) -> tuple[str, str | None]:
    """The audit's status and the step's kind (``None``: not a step of the item's trajectory), taking the locks
    a label save needs in one round trip on PostgreSQL:

    * the audit row FOR SHARE: label saves do not block each other, but closing (FOR UPDATE) waits for the saves
      in flight, and a save that waited sees "closed", so no label lands after the report was frozen;
    * the annotator's assignment row FOR UPDATE: it is the permission check, and it serialises one annotator's
      saves on one item (a double key press), so the label can be created without a savepoint.

    SQLite serialises writers (IMMEDIATE transactions): plain reads do. ``PermissionDenied`` when unassigned.
    """
    if connection.vendor != "postgresql":
        if not item.assignees.filter(pk=annotator.pk).exists():
            raise PermissionDenied("this item is not assigned to you")
        status = Audit.objects.filter(pk=item.audit_id).values_list("status", flat=True).get()
        kind = Step.objects.filter(pk=step_id, trajectory_id=item.trajectory_id).values_list(
            "kind", flat=True
        )
        return status, kind.first() if step_id is not None else None
    sql = f"""
        SELECT a.status, s.kind FROM {Audit._meta.db_table} a
        JOIN {AuditItem.assignees.through._meta.db_table} x ON x.audititem_id = %s AND x.user_id = %s
        LEFT JOIN {Step._meta.db_table} s ON s.id = %s AND s.trajectory_id = %s
        WHERE a.id = %s
        FOR SHARE OF a FOR UPDATE OF x"""
    with connection.cursor() as cursor:
        cursor.execute(sql, [item.pk, annotator.pk, step_id, item.trajectory_id, item.audit_id])
        row = cursor.fetchone()
    if row is None:
        raise PermissionDenied("this item is not assigned to you")
    return row[0], row[1]


def _status_locked(audit: Audit) -> str:
    """The audit's status with its row locked: an adjudication and closing the audit never interleave."""
    return Audit.objects.select_for_update().filter(pk=audit.pk).values_list("status", flat=True).get()


def _check_answers(
    steps: QuerySet[Step], step_id: int, label: str, *, where: str = "this trajectory"
) -> None:
    """``label`` must answer the question asked of the step (found in ``steps``), else a ValidationError."""
    kind = steps.values_list("kind", flat=True).first()
    if kind is None:
        raise ValidationError(f"step {step_id} is not part of {where}")
    if label not in LABELS_BY_KIND[Step.Kind(kind)]:
        raise ValidationError(f"{label!r} does not answer the question of a {kind.replace('_', '-')} step")


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
    oversample: float = 1.0,
) -> Audit:
    """Sample ``sample_size`` trajectories of the runs with ``seed`` and assign each to ``annotators_per_item``
    annotators (round-robin over the annotators sorted by id). Every item stores its stratum and its
    Horvitz–Thompson weight; by verdict or disagreement, that stratum is drawn ``oversample`` times as often.

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
    if not oversample > 0:
        raise ValidationError({"oversample": f"the over-sampling factor must be positive, got {oversample}"})
    judges: list[str] = []
    try:
        if stratification in strata.WEIGHTED:
            sample = strata.weighted_sample(
                run_ids=run_ids,
                stratification=stratification,
                n=sample_size,
                seed=seed,
                oversample=oversample,
            )
            drawn, judges = sample.drawn, sample.judges
        else:
            candidates = _candidates(run_ids, stratification)
            chosen = sample_ids(candidates, sample_size, seed=seed, stratified=bool(stratification))
            drawn = with_weights(candidates, chosen, stratified=bool(stratification))
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
        oversample=oversample,
        strata_judges=judges,
        annotators_per_item=annotators_per_item,
        guidelines=guidelines,
        blind=blind,
        created_by=created_by,
    )
    audit.source_runs.set(run_ids)
    people = sorted(annotators, key=lambda user: user.pk)
    audit.annotators.set(people)
    items = AuditItem.objects.bulk_create(
        AuditItem(audit=audit, trajectory_id=d.id, position=position, stratum=d.stratum, weight=d.weight)
        for position, d in enumerate(drawn)
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
    status, kind = _label_locks(item, annotator, step_id)
    if status != Audit.Status.OPEN:
        raise ValidationError(f"audit {item.audit_id} is {status}: labels cannot be saved now")
    if label not in Label.Value.values:
        raise ValidationError(f"unknown label {label!r}")
    if step_id is not None:
        if kind is None:
            raise ValidationError(f"step {step_id} is not part of this trajectory")
        if label not in LABELS_BY_KIND[Step.Kind(kind)]:
            raise ValidationError(
                f"{label!r} does not answer the question of a {kind.replace('_', '-')} step"
            )
    existing = Label.objects.filter(item=item, step_id=step_id, annotator=annotator).first()
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


@transaction.atomic
def adjudication_save(
    *, audit: Audit, step_id: int, label: str, comment: str = "", adjudicator: AbstractBaseUser
) -> Adjudication:
    """Set (or replace) the final label of a step of the audit; the report then uses it as the human answer."""
    if _status_locked(audit) == Audit.Status.CLOSED:
        raise ValidationError(f"audit {audit.pk} is closed: reopen it to adjudicate")
    if label not in Label.Value.values:
        raise ValidationError(f"unknown label {label!r}")
    steps = Step.objects.filter(trajectory__audit_items__audit=audit, pk=step_id)
    _check_answers(steps, step_id, label, where=f"audit {audit.pk}")
    adjudication, _ = Adjudication.objects.update_or_create(
        audit=audit,
        step_id=step_id,
        defaults={"label": label, "comment": comment, "adjudicator": adjudicator},
    )
    return adjudication


@transaction.atomic
def adjudication_delete(*, audit: Audit, step_id: int) -> None:
    """Back to the annotators' majority for the step."""
    if _status_locked(audit) == Audit.Status.CLOSED:
        raise ValidationError(f"audit {audit.pk} is closed: reopen it to change adjudications")
    Adjudication.objects.filter(audit=audit, step_id=step_id).delete()


# Which status each lifecycle action moves from and to.
TRANSITIONS = {
    "pause": ((Audit.Status.OPEN,), Audit.Status.PAUSED),
    "resume": ((Audit.Status.PAUSED,), Audit.Status.OPEN),
    "close": ((Audit.Status.OPEN, Audit.Status.PAUSED), Audit.Status.CLOSED),
    "reopen": ((Audit.Status.CLOSED,), Audit.Status.OPEN),
}


def _canonical_sha256(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@transaction.atomic
def audit_transition(*, audit: Audit, action: str, by: AbstractBaseUser | None = None) -> FrozenReport | None:
    """Move the audit through its lifecycle; closing freezes its report (returned), the others return None.

    The row is locked first, so two researchers closing at once freeze one report, and a label being saved
    (which reads the status in its own transaction) is either in the frozen report or refused.
    """
    if action not in TRANSITIONS:
        raise ValidationError(f"unknown audit action {action!r} (one of {', '.join(TRANSITIONS)})")
    sources, target = TRANSITIONS[action]
    locked = Audit.objects.select_for_update().get(pk=audit.pk)
    if locked.status not in sources:
        raise ValidationError(f"audit {audit.pk} is {locked.status}: it cannot {action}")
    locked.status = target
    locked.status_changed_at = timezone.now()
    locked.save(update_fields=["status", "status_changed_at"])
    audit.status, audit.status_changed_at = locked.status, locked.status_changed_at
    if target != Audit.Status.CLOSED:
        return None
    data = report_data.report_as_dict(report.audit_report(audit=locked))
    return FrozenReport.objects.create(
        audit=locked,
        report=data,
        n_labels=Label.objects.filter(item__audit=locked, step__isnull=False).count(),
        n_adjudications=Adjudication.objects.filter(audit=locked).count(),
        sha256=_canonical_sha256(data),
        closed_by=by,
    )
