"""Samples a trainer reports, stored as trajectories: each checked on its own, each key stored once.

A sample is a ``samples.jsonl`` row (trainer.callbacks.sample_row) under its idempotency ``key``; it is parsed with
its method's format (or ``chat``), checked (:mod:`webapp.training.ingest_rows`) and stored with its judge verdicts,
linked to its dataset question. :func:`webapp.training.ingest.store_batch` calls this for a batch's samples.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction

from scoring import formats
from webapp.runs.models import Run
from webapp.training.ingest_rows import OUTCOMES, Refusal, RowError, check_sample, sample_key_of
from webapp.trajectories.bulk import TrajectoryInput, VerdictInput, trajectory_bulk_create
from webapp.trajectories.chat import sample_format

logger = logging.getLogger(__name__)


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


def _question_map(run: Run, rows: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    if run.dataset_id is None:
        return {}
    from webapp.datasets.models import Question

    ids = {str(row.get("question_id") or "").split("#", 1)[0] for row in rows}
    found = Question.objects.filter(dataset_id=run.dataset_id, external_id__in=ids - {""})
    return {ext: (pk, ds) for ext, pk, ds in found.values_list("external_id", "pk", "dataset_id")}


def _detectors() -> frozenset[str]:
    from webapp.trajectories.models import JudgeVerdict

    return frozenset(JudgeVerdict.Detector.values)


def checked_samples(
    samples: Any, *, method: str
) -> tuple[dict[str, tuple[Mapping[str, Any], Any]], int, list[Refusal]]:
    """The valid samples by key (first of a key in the batch; with its parsed text), how many repeated a key of
    the batch, and a refusal for each invalid one."""
    detectors = _detectors()
    wanted: dict[str, tuple[Mapping[str, Any], Any]] = {}
    repeated = 0
    refused: list[Refusal] = []
    for index, sample in enumerate(samples or ()):
        key = sample_key_of(sample)
        row = sample.get("row") if isinstance(sample, Mapping) else None
        try:
            parsed = (
                formats.parse(sample_format(row, method), row["text"])  # "format": "chat": messages as JSON
                if isinstance(row, Mapping) and isinstance(row.get("text"), str)
                else None
            )
        except Exception as exc:  # a parser's bug must cost this sample only, named
            reason = f"could not be parsed: {type(exc).__name__}: {str(exc)[:200]}"
            refused.append(Refusal("samples", index, "row.text", reason, key=key))
            continue
        steps = {step.index for step in parsed.steps} if parsed is not None else set()
        try:
            key, row = check_sample(sample, known_steps=steps, detectors=detectors)
        except RowError as exc:
            refused.append(Refusal("samples", index, exc.field, exc.reason, key=key))
            continue
        if key in wanted:
            repeated += 1
        else:
            wanted[key] = (row, parsed)
    return wanted, repeated, refused


def store_samples(
    run: Run, new: Mapping[str, tuple[Mapping[str, Any], Any]], positions: Mapping[str, int]
) -> tuple[list[str], list[Refusal]]:
    """Store checked new samples as trajectories, each key taken only with its trajectory. A database error on the
    batch is retried sample by sample in savepoints: the sample that fails is refused, the others are stored."""
    from webapp.training.models import IngestedSample

    questions = _question_map(run, [row for row, _ in new.values()])
    judge_model = judge_model_for(run)
    items = {
        key: sample_input(
            row, run_id=run.pk, method=run.method, judge_model=judge_model, questions=questions, parsed=parsed
        )
        for key, (row, parsed) in new.items()
    }
    try:
        with transaction.atomic():
            trajectory_bulk_create(items=[item for item in items.values() if item is not None])
            IngestedSample.objects.bulk_create([IngestedSample(run_id=run.pk, key=key) for key in items])
        return list(items), []
    except Exception:  # one sample the database refuses must not cost the others
        logger.warning(
            "run %s: storing %d samples failed, retrying one by one", run.pk, len(items), exc_info=True
        )
    stored: list[str] = []
    refused: list[Refusal] = []
    for key, item in items.items():
        try:
            with transaction.atomic():
                if item is not None:
                    trajectory_bulk_create(items=[item])
                IngestedSample.objects.create(run_id=run.pk, key=key)
            stored.append(key)
        except Exception as exc:
            reason = f"could not be stored: {type(exc).__name__}: {str(exc)[:200]}"
            refused.append(Refusal("samples", positions.get(key), "row", reason, key=key))
    return stored, refused


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def sample_input(
    row: Mapping[str, Any],
    *,
    run_id: int,
    method: str,
    judge_model: str,
    questions: Mapping[str, tuple[int, int]],
    parsed: Any = None,
) -> TrajectoryInput | None:
    """One samples.jsonl row (trainer.callbacks.sample_row) as a trajectory to store, or None if unusable.

    ``questions`` maps the dataset's external ids to (question pk, dataset pk), so stored samples link to their
    question; the trainer's ids of a repeated rollout look like ``q17`` (agent rollouts append ``#n``).
    """
    text = row.get("text")
    if not isinstance(text, str):
        return None
    parsed = parsed if parsed is not None else formats.parse(sample_format(row, method), text)
    known_steps = {step.index for step in parsed.steps}
    verdicts = []
    for step in row.get("steps") or ():
        if not isinstance(step, dict) or step.get("index") not in known_steps:
            continue
        for verdict in step.get("verdicts") or ():
            if not isinstance(verdict, dict):
                continue
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
        training_step=int(row["step"]) if isinstance(row.get("step"), int | float) else None,
        total_reward=_number(row.get("reward")),
        reward_components={k: float(v) for k, v in components.items() if _number(v) is not None},
        step_rewards=[float(r) if _number(r) is not None else 0.0 for r in step_rewards]
        if isinstance(step_rewards, list)
        else None,
        verdicts=verdicts,
        end_reason=str(row.get("end") or ""),
        cut_turns=int(row["cut_turns"]) if isinstance(row.get("cut_turns"), int | float) else 0,
    )
