"""What trainers report, stored: one path for the local supervisor's file tailing and the HTTP ingest endpoint.

The reading of a trainer's files is :mod:`trainer.report_client` (standard library only, so a trainer on another
machine runs the same code); :func:`store_batch` stores one batch, idempotently per (run, step, key) for metrics and
per (run, sample key) for samples. The local supervisor calls it with what it read from disk; the endpoint
``POST /api/v1/runs/<id>/ingest/`` calls it with what a remote trainer's client sent.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from django.core import signing
from django.db import transaction
from django.utils import timezone

from scoring import formats
from trainer import report_client
from trainer.report_client import is_noise, log_tail, metric_rows
from webapp.runs.models import MetricPoint, Run
from webapp.trajectories.services import TrajectoryInput, VerdictInput, trajectory_bulk_create

logger = logging.getLogger(__name__)

__all__ = [
    "is_noise",
    "log_tail",
    "metric_rows",
    "read_new_lines",
    "read_progress",
    "sample_input",
    "store_batch",
]

LOG_TAIL_LINES = report_client.LOG_TAIL_LINES
OUTCOMES = ("true", "false", "error")
TOKEN_SALT = "searchlab.training.ingest"
SAMPLE_KEY_LENGTH = 200


def read_new_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete JSON lines appended after byte ``offset``, and the offset after the last complete line
    (:func:`trainer.report_client.read_new_lines` without the lines' offsets)."""
    rows, end = report_client.read_new_lines(path, offset)
    return [row for _, row in rows], end


def read_progress(output_dir: Path) -> dict[str, Any] | None:
    """The trainer's newest heartbeat (trainer.progress), or None."""
    return report_client.read_progress(output_dir)


# --- the run-scoped token ---------------------------------------------------------------------------------------


def ingest_token(run_id: int) -> str:
    """A token that lets its bearer report to run ``run_id`` and nothing else (signed with SECRET_KEY)."""
    return signing.dumps({"run": run_id}, salt=TOKEN_SALT)


def token_run_id(token: str) -> int | None:
    """The run a token was issued for, or None when it is not one of ours."""
    try:
        value = signing.loads(token, salt=TOKEN_SALT)
    except signing.BadSignature:
        return None
    run = value.get("run") if isinstance(value, dict) else None
    return run if isinstance(run, int) else None


# --- storing a batch --------------------------------------------------------------------------------------------


def judge_model_for(run: Run) -> str:
    """The judge model recorded on the verdicts of a run's samples."""
    judge = (run.judge_settings or {}).get("judge")
    if judge == "policy":
        return run.model_name
    if judge == "evidence":
        from scoring.judging.evidence import JUDGE_MODEL

        return JUDGE_MODEL
    if isinstance(judge, dict):
        return str(judge.get("model", "endpoint"))
    return f"{(run.config or {}).get('rollout', {}).get('factory', 'scripted')} rollout"


def store_metrics(run_id: int, rows: Sequence[Mapping[str, Any]]) -> int:
    # One point per (step, key), the batch's last: a trainer may log a key twice at one step, and PostgreSQL's
    # upsert refuses to touch a row twice in one statement.
    latest = {(int(row["step"]), str(row["key"])[:100]): row for row in rows}
    points = [
        MetricPoint(
            run_id=run_id,
            step=step,
            key=key,
            value=float(row["value"]),
            wall_time=dt.datetime.fromtimestamp(float(row["time"]), tz=dt.UTC),
        )
        for (step, key), row in latest.items()
    ]
    if points:
        # A replayed batch writes the same values again; a resumed trainer's newer value of (run, key, step) wins.
        MetricPoint.objects.bulk_create(
            points,
            update_conflicts=True,
            unique_fields=["run", "key", "step"],
            update_fields=["value", "wall_time"],
            batch_size=2000,
        )
    return len(points)


def _question_map(run: Run, rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    if run.dataset_id is None:
        return {}
    from webapp.datasets.models import Question

    ids = {str(row.get("question_id") or "").split("#", 1)[0] for row in rows}
    found = Question.objects.filter(dataset_id=run.dataset_id, external_id__in=ids - {""})
    return {ext: (pk, ds) for ext, pk, ds in found.values_list("external_id", "pk", "dataset_id")}


@transaction.atomic
def store_batch(*, run_id: int, batch: Mapping[str, Any]) -> dict[str, int]:
    """Store one batch (trainer.report_client.OutputTailer.read's shape): metric rows upserted per (run, step, key);
    samples whose ``key`` this run has not stored yet become trajectories (a key seen before is skipped, so a
    replayed batch stores nothing twice); the heartbeat, progress and log tail replace the run's. Returns counts.

    The run's row is locked for the batch, so two deliveries of one batch (a retry racing its own first try)
    are stored one after the other and the second finds the keys of the first; the unique constraint on
    (run, key) is the last guard. ``final`` ("finished" | "failed") ends a run whose executor is ``external``.
    """
    from webapp.training.models import IngestedSample

    run = Run.objects.select_for_update().get(pk=run_id)
    stored_metrics = store_metrics(run_id, metric_rows(batch.get("metrics") or ()))
    wanted: dict[str, Mapping[str, Any]] = {}
    for sample in batch.get("samples") or ():
        if (
            isinstance(sample, Mapping)
            and isinstance(sample.get("key"), str)
            and isinstance(sample.get("row"), Mapping)
        ):
            wanted.setdefault(sample["key"][:SAMPLE_KEY_LENGTH], sample["row"])
    seen = set(
        IngestedSample.objects.filter(run_id=run_id, key__in=list(wanted)).values_list("key", flat=True)
    )
    new = {key: row for key, row in wanted.items() if key not in seen}
    stored_samples = 0
    if new:
        IngestedSample.objects.bulk_create([IngestedSample(run_id=run_id, key=key) for key in new])
        questions = _question_map(run, list(new.values()))
        judge_model = judge_model_for(run)
        items = [
            item
            for row in new.values()
            if (
                item := sample_input(
                    row, run_id=run_id, method=run.method, judge_model=judge_model, questions=questions
                )
            )
            is not None
        ]
        stored_samples = trajectory_bulk_create(items=items) if items else 0
    fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
    if isinstance(batch.get("log_tail"), str):
        fields["log_tail"] = batch["log_tail"]
    if isinstance(batch.get("progress"), Mapping):
        fields["progress"] = dict(batch["progress"])
    Run.objects.filter(pk=run_id).update(**fields)
    final = batch.get("final")
    if final in ("finished", "failed") and run.is_active and (run.config or {}).get("executor") == "external":
        from webapp.runs.services import run_mark_finished

        status = Run.Status.FINISHED if final == "finished" else Run.Status.FAILED
        run_mark_finished(run_id=run_id, status=status, error=str(batch.get("error") or ""))
    return {
        "metrics": stored_metrics,
        "samples": stored_samples,
        "samples_new": len(new),
        "samples_duplicate": len(wanted) - len(new),
    }


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def sample_input(
    row: Mapping[str, Any],
    *,
    run_id: int,
    method: str,
    judge_model: str,
    questions: Mapping[str, tuple[int, int]],
) -> TrajectoryInput | None:
    """One samples.jsonl row (trainer.callbacks.sample_row) as a trajectory to store, or None if unusable.

    ``questions`` maps the dataset's external ids to (question pk, dataset pk), so stored samples link to their
    question; the trainer's ids of a repeated rollout look like ``q17`` (agent rollouts append ``#n``).
    """
    text = row.get("text")
    if not isinstance(text, str):
        return None
    parsed = formats.parse(method, text)
    known_steps = {step.index for step in parsed.steps}
    verdicts = []
    for step in row.get("steps") or ():
        if not isinstance(step, dict) or step.get("index") not in known_steps:
            continue
        for verdict in step.get("verdicts") or ():
            outcome = str(verdict.get("outcome", "error")).lower()
            verdicts.append(
                VerdictInput(
                    detector=str(verdict.get("detector")),
                    outcome=outcome if outcome in OUTCOMES else "error",
                    judge_model=judge_model,
                    step_index=step["index"],
                    raw_reply="" if outcome in OUTCOMES else f"judge outcome {outcome!r}",
                )
            )
    question_id = str(row.get("question_id") or "").split("#", 1)[0]
    question_pk, dataset_pk = questions.get(question_id, (None, None))
    components = row.get("components") if isinstance(row.get("components"), dict) else {}
    step_rewards = row.get("step_rewards")
    golds = row.get("golden_answers")
    return TrajectoryInput(
        parsed=parsed,
        golden_answers=[str(g) for g in golds] if isinstance(golds, list) else [],
        question_text=str(row.get("question") or ""),
        question_id=question_pk,
        dataset_id=dataset_pk,
        run_id=run_id,
        training_step=int(row["step"]) if isinstance(row.get("step"), int) else None,
        total_reward=_number(row.get("reward")),
        reward_components={k: float(v) for k, v in components.items() if _number(v) is not None},
        step_rewards=[float(r) if _number(r) is not None else 0.0 for r in step_rewards]
        if isinstance(step_rewards, list)
        else None,
        verdicts=verdicts,
        end_reason=str(row.get("end") or ""),
        cut_turns=int(row["cut_turns"]) if isinstance(row.get("cut_turns"), int) else 0,
    )
