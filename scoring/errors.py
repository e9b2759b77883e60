"""Typed errors of the scoring layer: every problem with a caller's input names the field it comes from.

:class:`ScoringInputError` subclasses ``ValueError`` so that callers written against the older bare ``ValueError``
keep working, but ``scoring.scorer.score`` never raises a *bare* ``ValueError``: each rejection is typed, with its
``field`` (``params.lambda_f``, ``judgements.step_flags``, ``golden_answers``) for an API to report.
"""

from __future__ import annotations


class ScoringInputError(ValueError):
    """A parameter or judgement the caller gave is missing, of the wrong type or out of range."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # picklable (gathered across processes, Celery)
        return type(self), (self.field, self.message)


class BatchAverageRequired(ScoringInputError):
    """HiPRAG Sec. 5.3: an ablation's trajectory has no step of the evaluated type and needs the batch's average
    bonus, which one trajectory alone cannot supply (score the batch with ``scoring.scorer.score_batch``)."""
