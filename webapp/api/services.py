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
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from webapp.api.models import ScoreJob

ScoreFunction = Callable[..., Any]
logger = logging.getLogger(__name__)


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


class ItemFailed(Exception):
    """One item's scoring raised something other than a typed error (a bug in a reward function): that item gets
    an error, the items beside it are scored."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(f"internal error: {type(exc).__name__}")
        self.field = "response"
        self.message = f"internal error while scoring this trajectory ({type(exc).__name__}); it was logged"


def _score_one(score: ScoreFunction, method: str, params: Mapping[str, Any], item: Mapping[str, Any]) -> Any:
    try:
        return score(
            method,
            item["response"],
            list(item["golden_answers"]),
            params=dict(params),
            judgements=item.get("judgements"),
        )
    except ValueError as exc:  # ScoringInputError (names its field) and MissingVerdict
        return exc
    except Exception as exc:  # a reward's bug stays this item's error
        logger.exception("scoring one trajectory (%s) failed", method)
        return ItemFailed(exc)


def _score_each(
    score: ScoreFunction, method: str, params: Mapping[str, Any], items: Sequence[Mapping[str, Any]]
) -> list[Any]:
    """One result (a ``Scored`` or the typed error) per item: the real scorer scores the items as one batch
    (``score_batch``, HiPRAG Sec. 5.3's batch average), a stand-in ``score`` function item by item. Should the
    batch call fail with an untyped exception, the items are scored one by one, so only the item at fault gets an
    error."""
    from scoring import scorer

    if score is scorer.score and items and "messages" in items[0]:  # chat trajectories (the API checks: all)
        from webapp.trajectories.chat import chat_score_batch

        return chat_score_batch(method, params, items)
    if score is scorer.score:
        try:
            return list(
                scorer.score_batch(
                    method,
                    [
                        scorer.BatchItem(
                            item["response"], list(item["golden_answers"]), item.get("judgements")
                        )
                        for item in items
                    ],
                    params=dict(params),
                )
            )
        except Exception:
            logger.exception(
                "scoring a batch of %d (%s) failed; scoring its items one by one", len(items), method
            )
    return [_score_one(score, method, params, item) for item in items]


def _result(scored: Any, index: int, *, params_refuse: bool = True) -> dict[str, Any]:
    """One item's result; an error names the item (its index in the request) and the field. An error in the shared
    ``params`` refuses the request (``params_refuse``) or, in a job already checked, is that item's error."""
    if isinstance(scored, ValueError | ItemFailed):
        # ScoringInputError (names its field) and MissingVerdict are ValueErrors
        field = getattr(scored, "field", None)
        message = getattr(scored, "message", str(scored))
        if params_refuse and field is not None and str(field).startswith("params"):
            raise ScoringParamsError(str(field), message) from scored
        return {"error": {"item": index, "field": field, "message": message}}
    trajectory, reward = scored.trajectory, scored.reward
    values = {
        "total": float(reward.total),
        "components": {k: float(v) for k, v in reward.components.items()},
        "step_rewards": [float(r) for r in reward.step_rewards],
    }
    if not all(
        math.isfinite(v) for v in (values["total"], *values["components"].values(), *values["step_rewards"])
    ):  # never stored nor sent as Infinity / NaN (invalid JSON)
        return {"error": {"item": index, "field": "response", "message": "the reward is not a finite number"}}
    return {
        **values,
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
    *,
    method: str,
    params: Mapping[str, Any],
    trajectories: Sequence[Mapping[str, Any]],
    params_refuse: bool = True,
) -> list[dict[str, Any]]:
    """Score each trajectory with ``scoring.scorer.score``.

    A trajectory the scorer rejects (a judgement missing or malformed, a number out of range, a verdict count that
    does not match its steps) gets an ``error`` naming its index (``item``) and the field instead of failing the
    batch; invalid shared ``params`` raise :class:`ScoringParamsError` unless ``params_refuse`` is false (a job,
    whose params were checked before it was queued: then they are each item's error).
    """
    return [
        _result(r, i, params_refuse=params_refuse)
        for i, r in enumerate(_score_each(scorer_function(), method, params, trajectories))
    ]


def params_checker() -> Callable[[str, Mapping[str, Any]], Any]:
    """``scoring.scorer.method_params``: a method's ``params`` checked against their declaration (scoring.params)."""
    return importlib.import_module("scoring.scorer").method_params  # type: ignore[no-any-return]


def score_params_check(*, method: str, params: Mapping[str, Any]) -> None:
    """Refuse invalid ``params`` before a job is queued (they are shared by the batch), nothing scored."""
    from scoring.errors import ScoringInputError

    try:
        params_checker()(method, params)
    except ScoringInputError as exc:
        if exc.field.startswith("params"):
            raise ScoringParamsError(exc.field, exc.message) from exc


def _json_safe(value: Any) -> Any:
    """``value`` with each non-finite float (JSON's 1e999, NaN) as the string "Infinity" / "-Infinity" / "NaN": a
    job's stored request stays valid JSON (PostgreSQL's jsonb refuses them), and the scorer still refuses that item,
    naming the field. The request's nesting is bounded by webapp.common.limits."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


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
        params=_json_safe(dict(params)),
        trajectories=[_json_safe(dict(t)) for t in trajectories],
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
        job.results = trajectories_score(
            method=job.method, params=job.params, trajectories=job.trajectories, params_refuse=False
        )
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
