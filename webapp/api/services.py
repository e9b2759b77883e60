"""Scoring raw trajectories with a method: inline for small batches, as a Celery job for large ones.

The reward functions live in ``scoring.scorer.score(method, text, golds, params=..., judgements=...)``, which parses
the text in the method's own format. Were that module missing, scoring answers "not implemented" (501) rather
than pretending.

A request's trajectories are one batch: they are scored with ``scoring.scorer.score_batch``, so HiPRAG's
over-/under-search-only ablations (``params.process``) give a trajectory without a step of the evaluated type the
average bonus of the request's batch (HiPRAG Sec. 5.3), as a trainer's generation batch does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from webapp.api.models import ScoreJob

ScoreFunction = Callable[..., Any]


class ScoringUnavailable(Exception):
    """``scoring.scorer.score`` is not there (yet)."""


def scorer_function() -> ScoreFunction:
    try:
        module = importlib.import_module("scoring.scorer")
    except ImportError:
        raise ScoringUnavailable("scoring.scorer is not available yet") from None
    score = getattr(module, "score", None)
    if not callable(score):
        raise ScoringUnavailable("scoring.scorer has no score() function")
    return score


class ScoringParamsError(Exception):
    """The batch's shared ``params`` are invalid: the whole request is refused, naming the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _score_each(
    score: ScoreFunction, method: str, params: Mapping[str, Any], items: Sequence[Mapping[str, Any]]
) -> list[Any]:
    """One result (a ``Scored`` or the typed error) per item: the real scorer scores the items as one batch
    (``score_batch``, HiPRAG Sec. 5.3's batch average), a stand-in ``score`` function item by item."""
    from scoring import scorer

    if score is scorer.score:
        return list(
            scorer.score_batch(
                method,
                [
                    scorer.BatchItem(item["response"], list(item["golden_answers"]), item.get("judgements"))
                    for item in items
                ],
                params=dict(params),
            )
        )
    results: list[Any] = []
    for item in items:
        try:
            results.append(
                score(
                    method,
                    item["response"],
                    list(item["golden_answers"]),
                    params=dict(params),
                    judgements=item.get("judgements"),
                )
            )
        except ValueError as exc:  # ScoringInputError (names its field) and MissingVerdict
            results.append(exc)
    return results


def _result(scored: Any) -> dict[str, Any]:
    if isinstance(
        scored, ValueError
    ):  # ScoringInputError (names its field) and MissingVerdict are ValueErrors
        field = getattr(scored, "field", None)
        message = getattr(scored, "message", str(scored))
        if field is not None and str(field).startswith("params"):
            raise ScoringParamsError(str(field), message) from scored
        return {"error": {"field": field, "message": message}}
    trajectory, reward = scored.trajectory, scored.reward
    return {
        "total": float(reward.total),
        "components": {k: float(v) for k, v in reward.components.items()},
        "step_rewards": [float(r) for r in reward.step_rewards],
        "parsed": {
            "format": trajectory.format,
            "format_ok": trajectory.valid,
            "format_error": str(trajectory.error) if trajectory.error else None,
            "answer": trajectory.answer,
            "n_steps": len(trajectory.steps),
            "n_searches": trajectory.n_searches,
        },
    }


def trajectories_score(
    *, method: str, params: Mapping[str, Any], trajectories: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Score each trajectory with ``scoring.scorer.score``.

    A trajectory the scorer rejects (a judgement missing or malformed, a verdict count that does not match its
    steps) gets an ``error`` naming the field instead of failing the batch; invalid shared ``params`` raise
    :class:`ScoringParamsError`.
    """
    return [_result(r) for r in _score_each(scorer_function(), method, params, trajectories)]


def score_params_check(*, method: str, params: Mapping[str, Any], trajectory: Mapping[str, Any]) -> None:
    """Score one trajectory to surface invalid ``params`` before a job is queued (they are shared by the batch)."""
    for result in _score_each(scorer_function(), method, params, [trajectory]):
        _result(result)


@transaction.atomic
def score_job_create(
    *,
    method: str,
    params: Mapping[str, Any],
    trajectories: Sequence[Mapping[str, Any]],
    created_by: AbstractBaseUser | None = None,
) -> ScoreJob:
    from webapp.api.tasks import score_job_run_task

    job = ScoreJob.objects.create(
        method=method,
        params=dict(params),
        trajectories=[dict(t) for t in trajectories],
        n_trajectories=len(trajectories),
        created_by=created_by,
    )
    transaction.on_commit(lambda: score_job_run_task.delay(job.pk))
    return job


def score_job_run(*, job_id: int) -> ScoreJob:
    claimed = ScoreJob.objects.filter(pk=job_id, status=ScoreJob.Status.PENDING).update(
        status=ScoreJob.Status.RUNNING
    )
    job = ScoreJob.objects.get(pk=job_id)
    if not claimed:
        return job
    unexpected: Exception | None = None
    try:
        job.results = trajectories_score(method=job.method, params=job.params, trajectories=job.trajectories)
        job.status = ScoreJob.Status.FINISHED
    except (ScoringUnavailable, ScoringParamsError) as exc:
        job.status, job.error = ScoreJob.Status.FAILED, str(exc)
    except Exception as exc:  # a bug in a reward function: the job must not stay "running" forever
        job.status, job.error = ScoreJob.Status.FAILED, f"internal error: {type(exc).__name__}: {exc}"
        unexpected = exc
    job.finished_at = timezone.now()
    job.save(update_fields=["results", "status", "error", "finished_at"])
    if unexpected is not None:
        raise unexpected  # logged by the worker with its traceback
    return job
