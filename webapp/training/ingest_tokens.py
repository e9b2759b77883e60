"""The run-scoped ingest token: it lets its bearer report to one run and nothing else.

Signed with SECRET_KEY and timed (it expires after INGEST_TOKEN_MAX_AGE_SECONDS), of the run's current token
generation (revoking a run's tokens bumps it). The ingest endpoint (:mod:`webapp.training.api`) checks a request's
token with :func:`token_refusal` and the run with :func:`run_refusal`.
"""

from __future__ import annotations

from typing import Any

from django.core import signing

from webapp.runs.models import Run
from webapp.training import reporting

TOKEN_SALT = "searchlab.training.ingest"


def ingest_token(run_id: int, generation: int | None = None) -> str:
    """A token that lets its bearer report to run ``run_id`` and nothing else (signed with SECRET_KEY, with its
    time: it expires after INGEST_TOKEN_MAX_AGE_SECONDS), of the run's current token generation (revoking bumps it)."""
    if generation is None:
        generation = Run.objects.values_list("ingest_generation", flat=True).filter(pk=run_id).first() or 0
    return signing.dumps({"run": run_id, "gen": generation}, salt=TOKEN_SALT)


def _token_value(token: str) -> dict[str, Any] | None:
    try:
        value = signing.loads(token, salt=TOKEN_SALT)
    except signing.BadSignature:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("run"), int) else None


def token_run_id(token: str) -> int | None:
    """The run a token was issued for, or None when it is not one of ours (expiry and revocation not checked)."""
    value = _token_value(token)
    return value["run"] if value else None


def token_refusal(token: str, run: Run) -> str | None:
    """Why ``token`` may not write to ``run`` (401), or None when it may: it must be signed by us for this run,
    younger than INGEST_TOKEN_MAX_AGE_SECONDS, and of the run's current generation (not revoked)."""
    value = _token_value(token)
    if value is None or value["run"] != run.pk:
        return "a valid ingest token of this run is required"
    max_age = reporting.token_max_age_seconds()
    try:
        signing.loads(token, salt=TOKEN_SALT, max_age=max_age)
    except signing.SignatureExpired:
        return (
            f"this ingest token has expired (older than {reporting.duration(max_age)}); "
            "ask for a new one (POST /api/v1/runs/<id>/ingest-token/)"
        )
    if value.get("gen", 0) != run.ingest_generation:
        return "this ingest token was revoked; ask for a new one (POST /api/v1/runs/<id>/ingest-token/)"
    return None


def run_refusal(run: Run) -> str | None:
    """Why ``run`` takes no more writes (409), or None."""
    if reporting.accepts_reports(run):
        return None
    return f"run {run.pk} has ended ({run.status}): it takes no more reports"
