"""Batches sent to searchlab's ingest endpoint: spooled on disk first, retried, nothing lost or doubled.

Standard library only (no Django, no torch). :class:`ReportClient` sends batches (:mod:`trainer.output_tailer`) to
``POST /api/v1/runs/<id>/ingest/`` with the run's own token (it can write to that run and nothing else). Every batch
is written to a spool folder on local disk *before* it is sent and removed only once searchlab answered, so a batch
survives searchlab being down, a network cut and the client's own restart; spooled batches are sent in order,
retried with exponential backoff and full jitter. Nothing is dropped silently: a row searchlab refuses (the answer's
``refused``, or a 4xx, never retried) or that cannot be sent (a NaN metric) is logged and kept in the dead-letter
file beside the spool, and a batch searchlab fails on never holds up the batches behind it. The answer's ``stop`` (a
researcher pressed Stop) is :attr:`ReportClient.stop_requested`; the wrapper (:mod:`trainer.report_client`) then
stops the trainer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer.ingest_http import INGEST_PATH, IngestRejected, Sender, ServerError, post_batch
from trainer.output_tailer import EXTRA_KEYS, Batch, batch_rows, split_batch

__all__ = [  # the HTTP names stay importable from here (trainer.report_client, tests)
    "DEAD_LETTER_SUFFIX",
    "INGEST_PATH",
    "MAX_DEPTH",
    "POISON_TRIES",
    "TOKEN_ENV",
    "IngestRejected",
    "ReportClient",
    "Sender",
    "ServerError",
    "json_safe",
]

logger = logging.getLogger(__name__)

TOKEN_ENV = "SEARCHLAB_RUN_TOKEN"
MAX_DEPTH = 64  # JSON nesting a row may have
DEAD_LETTER_SUFFIX = ".dead-letter.jsonl"  # beside the spool folder: <spool>.dead-letter.jsonl
POISON_TRIES = (
    3  # flushes a batch answered 500 while searchlab stores the batches behind it, before dead letter
)


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` with NaN/inf (which Python's json writes but JSON has not) as strings, so a request with such a
    sample stays valid JSON and searchlab names the field it refuses; nesting deeper than MAX_DEPTH raises
    ValueError."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v, depth + 1) for v in value]
    return value


def _jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        handle.flush()


class ReportClient:
    """A spooled, retrying sender of batches to one run's ingest endpoint; nothing it is given is dropped silently.

    :meth:`submit` writes the batch to ``spool_dir`` (atomically: a ``.tmp`` file renamed into place) and returns;
    rows that cannot be sent (a NaN metric) go to the dead-letter file at once. :meth:`flush` sends the spooled
    batches oldest first, deleting each once acknowledged:

    * unreachable (connection refused, timeout) after ``retries`` tries with backoff: the flush stops, the batch
      stays spooled for the next one (an outage);
    * 5xx/408/429: the batch stays spooled and the flush goes on with the batches behind it (a heartbeat always gets
      through); two such answers in a row are an outage and end the flush. A batch answered 500 in POISON_TRIES
      flushes while batches behind it are stored is dead-lettered;
    * 4xx: never retried: the batch's rows go to the dead-letter file with searchlab's reason (a 409 — the run has
      ended — also sets :attr:`stop_requested`);
    * 2xx: the rows searchlab ``refused`` go to the dead-letter file with their field and reason; ``stop: true``
      sets :attr:`stop_requested` (a researcher pressed Stop), which the trainer's loop reads.

    The dead-letter file (``<spool_dir>.dead-letter.jsonl``) holds one JSON line per row not stored: ``{"at",
    "run", "kind", "index", "field", "reason", "status", "row"}``.
    """

    def __init__(
        self,
        url: str,
        run_id: int,
        token: str,
        spool_dir: str | Path,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        sender: Sender | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        dead_letter: str | Path | None = None,
    ) -> None:
        self.run_id = run_id
        self.endpoint = url.rstrip("/") + INGEST_PATH.format(run_id=run_id)
        self.token = token
        self.spool = Path(spool_dir)
        self.spool.mkdir(parents=True, exist_ok=True)
        self.dead_letter = (
            Path(dead_letter) if dead_letter else self.spool.with_name(self.spool.name + DEAD_LETTER_SUFFIX)
        )
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.sender = sender or self._post
        self.sleep = sleep
        self.clock = clock
        self._lock = threading.Lock()
        self._sequence = max((int(p.stem) for p in self._spooled()), default=0)
        self._server_errors: dict[
            str, int
        ] = {}  # spool file → flushes it was answered 500 while others were stored
        # What happened, for logs and the fault test's figures.
        self.rows_submitted = 0  # rows spooled to be sent
        self.rows_acknowledged = 0  # rows in batches searchlab answered 2xx (stored, duplicate or refused)
        self.rows_refused = 0  # rows searchlab answered as refused (in a 2xx), dead-lettered
        self.rows_rejected = 0  # rows of batches answered 4xx, dead-lettered
        self.rows_invalid = 0  # rows never sent (NaN metric, unserialisable), dead-lettered
        self.rows_poisoned = 0  # rows of batches searchlab kept failing on, dead-lettered
        self.rows_duplicate = 0  # rows searchlab had stored before (a replay): acknowledged, not stored again
        self.refusal_reasons: dict[str, int] = {}
        self.requests = 0
        self.failed_requests = 0
        self.unreachable_since: float | None = None
        self.unreachable_seconds = 0.0
        self.stop_requested = False  # a researcher pressed Stop, or the run has ended (409)
        self.run_ended: str | None = None  # the run's status when searchlab answered that it has ended

    @property
    def rows_dead_lettered(self) -> int:
        return self.rows_refused + self.rows_rejected + self.rows_invalid + self.rows_poisoned

    def _spooled(self) -> list[Path]:
        return sorted(p for p in self.spool.glob("*.json") if p.stem.isdigit())

    def pending(self) -> int:
        """Batches spooled and not yet acknowledged."""
        return len(self._spooled())

    def pending_rows(self) -> int:
        rows = 0
        for path in self._spooled():
            with contextlib.suppress(OSError, ValueError):
                rows += batch_rows(json.loads(path.read_text(encoding="utf-8")))
        return rows

    def summary(self) -> dict[str, Any]:
        return {
            "rows_sent": self.rows_submitted,
            "rows_acknowledged": self.rows_acknowledged,
            "rows_refused": self.rows_refused,
            "rows_rejected": self.rows_rejected,
            "rows_invalid": self.rows_invalid,
            "rows_duplicate": self.rows_duplicate,
            "rows_dead_lettered": self.rows_dead_lettered,
            "refusal_reasons": dict(self.refusal_reasons),
            "batches_pending": self.pending(),
            "requests": self.requests,
            "failed_requests": self.failed_requests,
            "seconds_unreachable": round(self.unreachable_seconds, 1),
            "stop_requested": self.stop_requested,
        }

    def _letter(self, entries: Sequence[Mapping[str, Any]], *, status: int = 0) -> None:
        """Append rows not stored to the dead-letter file, and log them."""
        if not entries:
            return
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        lines = []
        for entry in entries:
            reason = f"{entry.get('field') or '-'}: {entry.get('reason')}"
            key = str(entry.get("field") or "-") + ": " + str(entry.get("reason") or "")[:80]
            self.refusal_reasons[key] = self.refusal_reasons.get(key, 0) + 1
            lines.append({"at": at, "run": self.run_id, "status": status, **entry})
            logger.warning(
                "report client: %s row %s not stored (%s); kept in %s",
                entry.get("kind"),
                entry.get("index"),
                reason,
                self.dead_letter,
            )
        _jsonl(self.dead_letter, lines)

    def submit(self, batch: Mapping[str, Any]) -> None:
        """Spool ``batch`` (split into requests of at most MAX_BATCH_ROWS rows); nothing is sent here. Its
        ``invalid`` rows (OutputTailer.read) and rows that cannot be written as JSON go to the dead-letter file."""
        invalid = list(batch.get("invalid") or ())
        clean: Batch = {k: v for k, v in batch.items() if k not in ("invalid", "offsets")}
        for kind in ("metrics", "samples"):
            rows = []
            for index, row in enumerate(clean.get(kind) or ()):
                try:
                    rows.append(json_safe(row))
                except (ValueError, RecursionError) as exc:
                    invalid.append(
                        {"kind": kind, "index": index, "field": "", "reason": str(exc), "row": None}
                    )
            clean[kind] = rows
        if invalid:
            self.rows_invalid += len(invalid)
            self._letter(invalid)
        if not batch_rows(clean) and all(clean.get(k) is None for k in EXTRA_KEYS):
            return
        with self._lock:
            for part in split_batch(clean):
                self._sequence += 1
                path = self.spool / f"{self._sequence:012d}.json"
                partial = path.with_suffix(".tmp")
                partial.write_text(json.dumps(part, ensure_ascii=False, allow_nan=False), encoding="utf-8")
                os.replace(partial, path)
                self.rows_submitted += batch_rows(part)

    def flush(self) -> bool:
        """Send every spooled batch in order; True when none is left."""
        with self._lock:
            skipped: list[Path] = []  # answered 5xx: left spooled while the batches behind them are tried
            in_a_row = 0
            for path in self._spooled():
                try:
                    batch = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    logger.error("report client: unreadable spool file %s left aside", path)
                    path.rename(path.with_suffix(".bad"))
                    continue
                try:
                    answer = self._send_with_retries(batch)
                except IngestRejected as exc:
                    self._rejected(batch, exc)
                    path.unlink()
                    continue
                except ServerError as exc:
                    in_a_row += 1
                    skipped.append(path)
                    if exc.status == 500:
                        self._server_errors.setdefault(path.name, 0)
                    logger.warning(
                        "report client: searchlab failed on %s (%s); trying the next", path.name, exc
                    )
                    if in_a_row >= 2:  # every batch fails: searchlab is down, not this batch
                        return False
                    continue
                except OSError as exc:
                    logger.warning(
                        "report client: searchlab unreachable (%s); %d batch(es) spooled", exc, self.pending()
                    )
                    return False
                in_a_row = 0
                path.unlink()
                self.rows_acknowledged += batch_rows(batch)
                self._answered(batch, answer)
                for earlier in skipped:
                    self._passed_over(earlier)
                skipped = []
            return not skipped

    def _passed_over(self, path: Path) -> None:
        """A batch answered 5xx while one behind it was stored: its heartbeat, progress and log tail are older than
        what searchlab has now (left out of its resend); one answered 500 POISON_TRIES times is dead-lettered."""
        try:
            batch = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if path.name in self._server_errors:
            self._server_errors[path.name] += 1
            if self._server_errors[path.name] >= POISON_TRIES:
                entries = self._entries(batch, f"searchlab failed on it {POISON_TRIES} times (HTTP 500)")
                self.rows_poisoned += batch_rows(batch)
                self._letter(entries, status=500)
                path.unlink()
                del self._server_errors[path.name]
                return
        stale = [key for key in ("progress", "log_tail", "heartbeat") if key in batch]
        if stale:
            for key in stale:
                del batch[key]
            partial = path.with_suffix(".tmp")
            partial.write_text(json.dumps(batch, ensure_ascii=False), encoding="utf-8")
            os.replace(partial, path)

    @staticmethod
    def _entries(batch: Mapping[str, Any], reason: str, field: str = "") -> list[dict[str, Any]]:
        entries = [
            {"kind": kind, "index": index, "field": field, "reason": reason, "row": row}
            for kind in ("metrics", "samples")
            for index, row in enumerate(batch.get(kind) or ())
        ]
        if batch.get("final") is not None:
            entries.append(
                {"kind": "final", "index": None, "field": "final", "reason": reason, "row": batch["final"]}
            )
        return entries

    def _rejected(self, batch: Mapping[str, Any], exc: IngestRejected) -> None:
        """A 4xx: the batch's rows (and its final status) to the dead-letter file, never resent."""
        field = str(exc.answer.get("field") or "")
        self.rows_rejected += batch_rows(batch)
        self._letter(self._entries(batch, str(exc), field), status=exc.status)
        if exc.status == 409 or exc.answer.get("stop"):
            self.stop_requested = True
            self.run_ended = str(exc.answer.get("ended") or "ended")
        logger.error("report client: searchlab rejected a batch of %d rows: %s", batch_rows(batch), exc)

    def _answered(self, batch: Mapping[str, Any], answer: Mapping[str, Any] | None) -> None:
        """A 2xx: the rows searchlab refused to the dead-letter file; its ``stop``."""
        if not isinstance(answer, Mapping):
            return
        for name in ("metrics_duplicate", "samples_duplicate"):
            count = answer.get(name)
            if isinstance(count, int) and not isinstance(count, bool):
                self.rows_duplicate += count
        if answer.get("stop") and not self.stop_requested:
            logger.info("report client: searchlab asks this run to stop")
            self.stop_requested = True
        refused = answer.get("refused")
        if not isinstance(refused, list) or not refused:
            return
        entries = []
        for item in refused:
            if not isinstance(item, Mapping):
                continue
            kind, index = item.get("kind"), item.get("index")
            rows = batch.get(kind) if kind in ("metrics", "samples") else None
            row: Any = (
                rows[index]
                if isinstance(rows, list) and isinstance(index, int) and 0 <= index < len(rows)
                else None
            )
            if kind == "batch":
                row = batch.get(str(item.get("field")))
            else:
                self.rows_refused += 1
            entries.append(
                {
                    "kind": kind,
                    "index": index,
                    "field": item.get("field"),
                    "reason": item.get("reason"),
                    "key": item.get("key"),
                    "row": row,
                }
            )
        self._letter(entries, status=200)

    def _send_with_retries(self, batch: Batch) -> Mapping[str, Any] | None:
        for attempt in range(self.retries):
            self.requests += 1
            try:
                answer = self.sender(batch)
            except IngestRejected:
                raise
            except OSError:
                self.failed_requests += 1
                now = self.clock()
                if self.unreachable_since is None:
                    self.unreachable_since = now
                if attempt == self.retries - 1:
                    raise
                # Exponential backoff with full jitter: many trainers coming back at once do not stampede.
                self.sleep(random.uniform(0, min(self.max_backoff, self.backoff * 2**attempt)))
                continue
            if self.unreachable_since is not None:
                self.unreachable_seconds += self.clock() - self.unreachable_since
                self.unreachable_since = None
            return answer
        return None

    def _post(self, batch: Batch) -> Mapping[str, Any] | None:
        return post_batch(self.endpoint, self.token, batch, timeout=self.timeout)
