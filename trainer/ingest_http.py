"""One batch POSTed to searchlab's ingest endpoint (``POST /api/v1/runs/<id>/ingest/``) and its answer classified
for :class:`trainer.ingest_client.ReportClient`'s retries: 2xx is the answer, 5xx/408/429 a :class:`ServerError`
(retried), another 4xx an :class:`IngestRejected` (never retried), no answer an ``OSError`` (retried, then spooled).

Standard library only (no Django, no torch).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from trainer.output_tailer import Batch

INGEST_PATH = "/api/v1/runs/{run_id}/ingest/"


class IngestRejected(Exception):
    """searchlab answered 4xx (other than 408/429): the batch is malformed, the token is expired or revoked (401)
    or the run has ended (409); retrying the same request would be answered the same, so it is never retried."""

    def __init__(self, message: str, *, status: int = 0, answer: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.answer: Mapping[str, Any] = answer or {}


class ServerError(OSError):
    """searchlab answered 5xx, 408 or 429: retried; a batch answered 500 while the batches behind it are stored is
    a batch searchlab cannot take, and goes to the dead-letter file after POISON_TRIES flushes."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


Sender = Callable[[Batch], Mapping[str, Any] | None]


def post_batch(endpoint: str, token: str, batch: Batch, *, timeout: float) -> Mapping[str, Any] | None:
    """POST ``batch`` as JSON with the run's token; searchlab's answer (None when it is not a JSON object)."""
    body = json.dumps(batch, ensure_ascii=False, allow_nan=False).encode("utf-8")
    request = urllib.request.Request(
        endpoint,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            data = response.read()
    except urllib.error.HTTPError as exc:
        raw = exc.read()[:5000].decode("utf-8", errors="replace")
        if exc.code in (408, 429) or exc.code >= 500:
            raise ServerError(f"HTTP {exc.code}: {raw[:500]}", status=exc.code) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = {}
        detail = answer.get("detail", raw[:500]) if isinstance(answer, dict) else raw[:500]
        raise IngestRejected(
            f"HTTP {exc.code}: {detail}",
            status=exc.code,
            answer=answer if isinstance(answer, dict) else {},
        ) from None
    # URLError, ConnectionError and socket timeouts are OSErrors: retried, then spooled.
    try:
        answer = json.loads(data)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
