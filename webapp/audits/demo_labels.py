"""The demo's audit, labelled: team-written judge replies on the HiPRAG run, and two annotators' labels.

* ``demo/verdicts_hiprag_scripted.jsonl``: one reply per step of the demo's HiPRAG run, written by the team in the
  format of HiPRAG's judges (Fig. 5's equivalence judge for search steps, Fig. 6's verifier for the others) and
  read by ``scoring.judging.hiprag``'s parsers, as if a judge endpoint had sent them. They are stored as the judge
  version ``scripted-judge·hiprag-prompt@…`` (kind ``scripted``), beside the team's own verdicts.
* ``demo/audit_labels.jsonl``: labels of ``ann`` and ``bea`` on the audited steps, and a researcher's adjudication
  (a line with ``adjudicator``) of the step they disagree on. ``ann`` leaves two trajectories unlabelled, so the
  annotation queue still has work for her.

* ``demo/training_audit_labels.jsonl`` (written by ``demo/make_training_audit_data.py``): ``ann``'s and ``bea``'s
  labels on every step of the demo's HiPRAG training run, audited by training step, and ``rey``'s adjudication of
  each step they disagree on.

Lines name a step by its question (``question_id``, the demo's ids), the trajectory's ``training_step`` where the
run has several trajectories of one question (absent: none), and the step index, so they do not depend on the
database's ids; a line for a trajectory the audit did not sample is skipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from scoring.judging import hiprag as hiprag_judging
from webapp.audits.models import Audit, AuditItem
from webapp.audits.services import adjudication_save, label_save
from webapp.trajectories.judge_versions import judge_spec, judge_version_get_or_create
from webapp.trajectories.models import JudgeVerdict, Step

SCRIPTED_JUDGE = "scripted-judge"
_PARSERS = {
    "over_search": hiprag_judging.over_search_verdict,
    "under_search": hiprag_judging.under_search_verdict,
}


def _lines(path: Path) -> list[dict[str, Any]]:
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path.name} line {number}: not JSON ({exc.msg})") from None
        for name in ("question_id", "step"):
            if name not in record:
                raise ValueError(f"{path.name} line {number}: field {name!r} is missing")
        found.append({**record, "_where": f"{path.name} line {number}"})
    return found


def _steps(run_id: int) -> dict[tuple[str, int], Step]:
    steps = Step.objects.filter(trajectory__run_id=run_id).select_related("trajectory__question")
    return {
        (step.trajectory.question.external_id, step.index): step
        for step in steps
        if step.trajectory.question is not None
    }


def demo_judge_load(*, run_id: int, path: Path) -> int:
    """Store the scripted judge's verdicts on the run's steps; returns how many."""
    spec = judge_spec(method="hiprag", judge_model=SCRIPTED_JUDGE, settings={"kind": "scripted"})
    version = judge_version_get_or_create(spec)
    steps = _steps(run_id)
    rows = []
    for record in _lines(path):
        step = steps.get((record["question_id"], record["step"]))
        detector = record.get("detector")
        if step is None or detector not in _PARSERS:
            raise ValueError(
                f"{record['_where']}: no step {record['step']} of {record['question_id']!r}, "
                f"or detector {detector!r} is not over_search / under_search"
            )
        verdict = _PARSERS[detector](record["reply"])
        rows.append(
            JudgeVerdict(
                trajectory_id=step.trajectory_id,
                step=step,
                detector=detector,
                outcome="error" if not verdict.usable else verdict.value,
                raw_reply=record["reply"],
                judge_model=SCRIPTED_JUDGE,
                version=version,
            )
        )
    JudgeVerdict.objects.bulk_create(rows)
    return len(rows)


def demo_labels_load(*, audit: Audit, path: Path, users: dict[str, AbstractBaseUser]) -> tuple[int, int]:
    """Save the annotators' labels and the adjudications on the audit's sampled steps; (labels, adjudications)."""
    items = {
        (item.trajectory.question.external_id, item.trajectory.training_step, step.index): (item, step)
        for item in AuditItem.objects.filter(audit=audit)
        .select_related("trajectory__question")
        .prefetch_related("trajectory__steps", "assignees")
        if item.trajectory.question is not None
        for step in item.trajectory.steps.all()
    }
    n_labels = n_adjudications = 0
    for record in _lines(path):
        found = items.get((record["question_id"], record.get("training_step"), record["step"]))
        if found is None:
            continue  # the audit did not sample this trajectory
        item, step = found
        if "adjudicator" in record:
            adjudication_save(
                audit=audit,
                step_id=step.pk,
                label=record["label"],
                comment=record.get("comment", ""),
                adjudicator=users[record["adjudicator"]],
            )
            n_adjudications += 1
            continue
        annotator = users.get(record.get("annotator", ""))
        if annotator is None:
            raise ValueError(f"{record['_where']}: annotator {record.get('annotator')!r} is not a demo user")
        if all(assignee.pk != annotator.pk for assignee in item.assignees.all()):
            item.assignees.add(annotator)
        label_save(
            item=item,
            annotator=annotator,
            step_id=step.pk,
            label=record["label"],
            comment=record.get("comment", ""),
        )
        n_labels += 1
    return n_labels, n_adjudications
