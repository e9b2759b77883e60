"""Trainers report to searchlab over HTTP: metrics, samples, the heartbeat and the log tail, nothing lost or doubled.

Standard library only (no Django, no torch): a trainer on a GPU node, inside a Ray job or beside a veRL run imports
this and nothing else of the web app. Three parts:

* :class:`OutputTailer` reads what :mod:`trainer.callbacks` and :mod:`trainer.progress` write (``metrics.jsonl``,
  ``samples.jsonl``, ``progress.json``) and the trainer's log, and turns the new part into one *batch*. The web app's
  local supervisor reads a run's files with the same class and stores the batch with the same server-side function
  (``webapp.training.ingest.store_batch``) that the HTTP endpoint calls: there is one ingest path.
* :class:`ReportClient` sends batches to ``POST /api/v1/runs/<id>/ingest/`` with the run's own token (it can write
  to that run and nothing else). Every batch is written to a spool folder on local disk *before* it is sent and
  removed only once searchlab answered, so a batch survives searchlab being down, a network cut and the client's
  own restart; spooled batches are sent in order, retried with exponential backoff and full jitter. Nothing is
  dropped silently: a row searchlab refuses (the answer's ``refused``, or a 4xx, never retried) or that cannot be
  sent (a NaN metric) is logged and kept in the dead-letter file beside the spool, and a batch searchlab fails on
  never holds up the batches behind it. The answer's ``stop`` (a researcher pressed Stop) is
  :attr:`ReportClient.stop_requested`; the wrapper below then stops the trainer.
* ``python -m trainer.report_client --url … --run-id … --output-dir … -- COMMAND…`` runs a trainer as its child,
  copies its output to a log file (and to its own stdout, which a Ray job keeps), tails its files and reports them
  until the child exits and every batch is acknowledged (or ``--drain-seconds`` pass); exit status: the child's.
  With ``--spool-only --spool DIR --config CONFIG`` (a machine without searchlab) it sends nothing: the batches
  stay in ``DIR`` with a manifest of the run, and ``manage.py replay_spool DIR`` brings them in (:mod:`trainer.spool`).

Idempotency is the server's: a metric is one row per (run, step, key) (a replay overwrites it with the same value)
and a sample carries a ``key`` unique within its run (``<step>@<byte offset in samples.jsonl>`` here; veRL's
follower uses ``verl:<step>:<line>``), stored once whatever how often it arrives. So a batch sent twice (searchlab
stored it but the answer was lost) is harmless, and "at least once" sending gives "exactly once" rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"  # trainer.callbacks.METRICS_FILE (not imported: it imports transformers)
SAMPLES_FILE = "samples.jsonl"
PROGRESS_FILE = "progress.json"  # trainer.progress.PROGRESS_FILE
INGEST_PATH = "/api/v1/runs/{run_id}/ingest/"
TOKEN_ENV = "SEARCHLAB_RUN_TOKEN"
LOG_TAIL_LINES = 200
_LOG_TAIL_BYTES = 256 * 1024
EXTRA_KEYS = (
    "progress",
    "log_tail",
    "heartbeat",
    "final",
    "error",
)  # the latest state, not rows: on the last request
MAX_BATCH_ROWS = 500  # metric rows + samples per request: a backlog replays in requests of bounded size
MAX_BATCH_BYTES = 1_000_000
MAX_STEP = 2**31 - 1  # searchlab's step columns (webapp.training.ingest_rows.MAX_STEP)
MAX_DEPTH = 64  # JSON nesting a row may have
DEAD_LETTER_SUFFIX = ".dead-letter.jsonl"  # beside the spool folder: <spool>.dead-letter.jsonl
POISON_TRIES = (
    3  # flushes a batch answered 500 while searchlab stores the batches behind it, before dead letter
)

Batch = dict[str, Any]


# --- reading what a trainer writes -----------------------------------------------------------------------------


def read_new_lines(path: Path, offset: int) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """The complete JSON lines appended after byte ``offset`` as (byte offset of the line, object), and the offset
    after the last complete line.

    A line the trainer is still writing (no newline yet) is left for the next call. A line that is not a JSON
    object is logged and skipped, so one bad line cannot stall a run's curves. A file shorter than ``offset`` was
    rewritten (a resumed trainer keeps the rows up to its checkpoint, trainer.callbacks.truncate_after): it is read
    again from the start, and ingest's keys skip what was stored before.
    """
    try:
        with path.open("rb") as handle:
            if handle.seek(0, 2) < offset:
                offset = 0
            handle.seek(offset)
            chunk = handle.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n")
    if end < 0:
        return [], offset
    rows: list[tuple[int, dict[str, Any]]] = []
    position = offset
    for raw in chunk[: end + 1].split(b"\n")[:-1]:
        start, position = position, position + len(raw) + 1
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            row = None
        if isinstance(row, dict):
            rows.append((start, row))
        else:
            logger.warning("%s: skipped a line that is not a JSON object: %r", path, raw[:200])
    return rows, offset + end + 1


def _finite(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def check_metric_row(row: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str, str]:
    """A metrics.jsonl row as sent (``{"step", "key", "value", "time"}``), or None with the field and the reason it
    cannot be (NaN/inf are refused: JSON and charts reject them). searchlab checks the same again
    (webapp.training.ingest_rows); this keeps such rows out of the request and in the dead-letter file."""
    for name in ("step", "key", "value", "time"):
        if name not in row:
            return None, name, "is missing"
    step = row["step"]
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        return None, "step", f"must be an integer between 0 and {MAX_STEP}, got {_shown(row['step'])}"
    if not isinstance(row["key"], str) or not row["key"]:
        return None, "key", f"must be a non-empty string, got {_shown(row['key'])}"
    for name in ("value", "time"):
        if not _finite(row[name]):
            return None, name, f"must be a finite number, got {_shown(row[name])}"
    return {"step": step, "key": row["key"], "value": float(row["value"]), "time": float(row["time"])}, "", ""


def split_metric_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows to send, and the others as dead letters ``{"kind", "index", "field", "reason", "row"}``."""
    kept: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        checked, field, reason = check_metric_row(row)
        if checked is None:
            invalid.append({"kind": "metrics", "index": index, "field": field, "reason": reason, "row": row})
        else:
            kept.append(checked)
    return kept, invalid


def metric_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rows with a step, a key, a finite value and a time (:func:`split_metric_rows` without the others)."""
    return split_metric_rows(rows)[0]


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


# Library warnings every CPU run prints, which say nothing about the run (the log file keeps them): Python's
# "file:line: FutureWarning: …" lines (and the indented source line quoted under each), transformers/TRL notices.
_NOISE = re.compile(
    r"(?:^\S+:\d+: (?:Future|Deprecation|Pending\w*|User|Runtime)Warning: )"
    r"|(?:^\s+warnings\.warn\()"
    r"|(?:generation flags are not valid and may be ignored)"
    r"|(?:Setting `pad_token_id` to `eos_token_id`)"
    r"|(?:`torch_dtype` is deprecated)"
    r"|(?:Passing `generation_config` together with generation-related arguments)"
)


def is_noise(line: str) -> bool:
    return _NOISE.search(line) is not None


def tail_text(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log's text, known library warnings left out; carriage returns split lines."""
    kept: list[str] = []
    after_warning = False
    for line in text.replace("\r", "\n").split("\n"):
        if not line.strip():
            continue
        if is_noise(line) or (after_warning and line.startswith((" ", "\t"))):
            after_warning = "Warning: " in line
            continue
        after_warning = False
        kept.append(line)
    return "\n".join(kept[-lines:])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of the trainer's stdout/stderr file (:func:`tail_text`)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - _LOG_TAIL_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return ""
    return tail_text(data.decode("utf-8", errors="replace"), lines)


def read_progress(output_dir: Path) -> dict[str, Any] | None:
    """The trainer's newest heartbeat (``progress.json``), or None (none yet, or being replaced)."""
    try:
        value = json.loads((output_dir / PROGRESS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def sample_key(step: Any, offset: int) -> str:
    """A sample's idempotency key: its step and the byte offset of its line in samples.jsonl."""
    return f"{step if isinstance(step, int) else '-'}@{offset}"


class OutputTailer:
    """The new part of a trainer's output folder (and log) since the last :meth:`read`, as one batch.

    A batch is ``{"metrics": [{"step", "key", "value", "time"}], "samples": [{"key", "row"}], "progress": {…} or
    None, "log_tail": str or None, "offsets": {"metrics", "samples"}, "invalid": [dead letters]}``; progress and
    log tail are sent only when they changed; a metric row that cannot be sent (NaN, no step) is in ``invalid``. ``offsets`` are where the next read starts: the supervisor stores them, so a restarted supervisor
    resumes there (and re-reading a part is harmless: ingest is idempotent).
    """

    def __init__(
        self,
        output_dir: str | Path,
        *,
        log_path: str | Path | None = None,
        metrics_offset: int = 0,
        samples_offset: int = 0,
    ) -> None:
        self.output_dir = Path(output_dir)
        self.log_path = Path(log_path) if log_path else None
        self.metrics_offset = metrics_offset
        self.samples_offset = samples_offset
        self._last_progress: dict[str, Any] | None = None
        self._last_tail: str | None = None

    def read(self) -> Batch:
        metrics, self.metrics_offset = read_new_lines(self.output_dir / METRICS_FILE, self.metrics_offset)
        samples, self.samples_offset = read_new_lines(self.output_dir / SAMPLES_FILE, self.samples_offset)
        progress = read_progress(self.output_dir)
        fresh = progress is not None and progress != self._last_progress
        self._last_progress = progress if progress is not None else self._last_progress
        tail = log_tail(self.log_path) if self.log_path else None
        changed = tail is not None and tail != self._last_tail
        self._last_tail = tail
        kept, invalid = split_metric_rows([row for _, row in metrics])
        return {
            "metrics": kept,
            "samples": [{"key": sample_key(row.get("step"), start), "row": row} for start, row in samples],
            "progress": progress if fresh else None,
            "log_tail": tail if changed else None,
            "offsets": {"metrics": self.metrics_offset, "samples": self.samples_offset},
            "invalid": invalid,  # rows never sent: ReportClient.submit dead-letters them (the supervisor logs them)
        }


def batch_rows(batch: Mapping[str, Any]) -> int:
    return len(batch.get("metrics") or ()) + len(batch.get("samples") or ())


def split_batch(
    batch: Mapping[str, Any], limit: int = MAX_BATCH_ROWS, max_bytes: int = MAX_BATCH_BYTES
) -> list[Batch]:
    """``batch`` as requests of at most ``limit`` rows and about ``max_bytes`` of JSON (Django refuses a body over
    DATA_UPLOAD_MAX_MEMORY_SIZE, 2.5 MB by default); heartbeat and log tail ride on the last one. A single row larger
    than ``max_bytes`` goes alone."""
    rows = [("metrics", row) for row in batch.get("metrics") or ()]
    rows += [("samples", row) for row in batch.get("samples") or ()]
    parts: list[Batch] = []
    current: Batch = {"metrics": [], "samples": []}
    count = size = 0
    for kind, row in rows:
        row_size = len(json.dumps(row, ensure_ascii=False).encode("utf-8"))
        if count and (count + 1 > limit or size + row_size > max_bytes):
            parts.append(current)
            current, count, size = {"metrics": [], "samples": []}, 0, 0
        current[kind].append(row)
        count, size = count + 1, size + row_size
    for extra in EXTRA_KEYS:
        if batch.get(extra) is not None:
            current[extra] = batch[extra]
    if count or len(current) > 2 or not parts:
        parts.append(current)
    return parts


# --- sending -----------------------------------------------------------------------------------------------------


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
        body = json.dumps(batch, ensure_ascii=False, allow_nan=False).encode("utf-8")
        request = urllib.request.Request(
            self.endpoint,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
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


# --- the wrapper: a trainer as a child process, reported while it runs -------------------------------------------


def _copy_output(stream: Any, log_path: Path, echo: bool) -> None:
    with log_path.open("ab") as log:
        for chunk in iter(lambda: stream.read1(65536), b""):
            log.write(chunk)
            log.flush()
            if echo:
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()


def _hear_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def _forward_stop(child: subprocess.Popen[bytes]) -> Iterator[list[float]]:
    """SIGTERM/SIGINT to the wrapper (a Ray job stop, Ctrl-C) become SIGINT to the child's group: the trainer's
    cooperative stop (trainer.stop), its files flushed; the wrapper keeps reporting until the child exits."""
    stops: list[float] = []
    # Ray's job stop signals every process of the job (RAY_JOB_STOP_SIGNAL=SIGINT): the trainer already has its
    # SIGINT then, and a second one could interrupt its unwinding.
    reaches_child = os.environ.get("SEARCHLAB_STOP_REACHES_CHILD") == "1"

    def handler(signum: int, frame: Any) -> None:
        stops.append(time.monotonic())
        if signum == signal.SIGINT and reaches_child:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGINT)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stops
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def write_files_from_env(run_dir: Path) -> None:
    """A Ray job gets its run's files in its runtime environment (no shared disk with the web app needed):
    ``SEARCHLAB_RUN_CONFIG`` → config.json, ``SEARCHLAB_RUN_QUESTIONS`` → questions.jsonl."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for variable, name in (
        ("SEARCHLAB_RUN_CONFIG", "config.json"),
        ("SEARCHLAB_RUN_QUESTIONS", "questions.jsonl"),
    ):
        value = os.environ.get(variable)
        if value:
            (run_dir / name).write_text(value, encoding="utf-8")


def report_while_running(
    command: Sequence[str],
    client: ReportClient,
    tailer: OutputTailer,
    *,
    log_path: Path,
    interval: float = 1.0,
    drain_seconds: float = 300.0,
    heartbeat_seconds: float = 10.0,
    echo: bool = True,
) -> int:
    """Run ``command``, report its output every ``interval`` seconds, drain the spool after it exits; its exit code."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_hear_sigint,
    )
    assert child.stdout is not None
    copier = threading.Thread(target=_copy_output, args=(child.stdout, log_path, echo), daemon=True)
    copier.start()
    beat_at = 0.0
    stop_sent = False
    with _forward_stop(child):
        exit_code: int | None = None
        while exit_code is None:
            try:
                exit_code = child.wait(timeout=interval)
            except subprocess.TimeoutExpired:
                exit_code = None
            if exit_code is not None:
                copier.join(timeout=5)
            batch = tailer.read()
            if time.monotonic() - beat_at >= heartbeat_seconds:
                batch["heartbeat"] = (
                    True  # a long step writes nothing: searchlab still hears the trainer is alive
                )
            if exit_code is not None:
                # The run's end as the trainer saw it: searchlab ends an external run with it (cancelled after a
                # Stop); a run searchlab supervises (a Ray job) takes its status from its supervisor instead.
                batch["final"] = "finished" if exit_code == 0 else "failed"
                if exit_code != 0:
                    batch["error"] = f"trainer exited with {exit_code}"
            if batch_rows(batch) or any(batch.get(k) is not None for k in EXTRA_KEYS):
                beat_at = time.monotonic()
            client.submit(batch)
            client.flush()
            if client.stop_requested and not stop_sent and exit_code is None:
                # A researcher pressed Stop (the ingest answer said ``stop``): the trainer's cooperative stop.
                logger.info("report client: stop requested by searchlab, SIGINT to the trainer")
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.pid, signal.SIGINT)
                stop_sent = True
        deadline = time.monotonic() + drain_seconds
        while not client.flush() and time.monotonic() < deadline:
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)  # what the trainer left behind
    summary = {**client.summary(), "exit_code": exit_code}
    if summary["batches_pending"]:
        logger.error(
            "report client: %d batch(es) still spooled in %s (resent by the next client on this spool)",
            summary["batches_pending"],
            client.spool,
        )
    print("searchlab report: " + json.dumps(summary), flush=True)
    return exit_code if exit_code >= 0 else 128 - exit_code  # killed by signal N: 128 + N, as a shell says


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.report_client",
        description="Run a trainer and report its metrics, samples, heartbeat and log to searchlab over HTTP, "
        "or (--spool-only, on a machine without searchlab) to a spool folder that manage.py replay_spool replays.",
    )
    parser.add_argument("--url", help="searchlab's base URL, e.g. http://web:8000")
    parser.add_argument("--run-id", type=int)
    parser.add_argument("--token-env", default=TOKEN_ENV, help="the variable holding the run's ingest token")
    parser.add_argument("--run-dir", help="config.json, trainer.log and the spool go here")
    parser.add_argument("--output-dir", required=True, help="the trainer's output_dir (metrics.jsonl, …)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between reports")
    parser.add_argument(
        "--drain-seconds", type=float, default=300.0, help="how long to replay after the exit"
    )
    parser.add_argument(
        "--files-from-env", action="store_true", help="write config.json/questions.jsonl first"
    )
    detached = parser.add_argument_group("a machine without searchlab (trainer.spool)")
    detached.add_argument(
        "--spool-only", action="store_true", help="send nothing: every batch stays in --spool"
    )
    detached.add_argument("--spool", help="the spool folder (manifest.json, the batches, trainer.log)")
    detached.add_argument("--config", help="the trainer's config JSON, recorded in the manifest")
    detached.add_argument(
        "--name", default="", help="the run's name in searchlab (default: the spool's name)"
    )
    detached.add_argument("--method", default="", help="default: the config's method")
    detached.add_argument("--algorithm", default="", help="default: the config's algorithm")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the trainer's argv")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("the trainer's command is required after --")
    if args.spool_only:
        from trainer import spool

        if not args.spool or not args.config:
            parser.error("--spool-only needs --spool DIR and --config (the trainer's config JSON)")
        try:
            config = spool.read_json_object(Path(args.config), args.config)
        except spool.SpoolFileError as exc:
            parser.error(f"--config: {exc}")
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        return spool.run_detached(
            command,
            args.spool,
            config,
            args.output_dir,
            interval=args.interval,
            **{key: getattr(args, key) for key in ("name", "method", "algorithm")},
        )
    for option in ("url", "run_id", "run_dir"):
        if getattr(args, option) is None:
            parser.error(f"--{option.replace('_', '-')} is required (or --spool-only)")
    token = os.environ.get(args.token_env, "")
    if not token:
        parser.error(f"${args.token_env} is empty: the run's ingest token is required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    run_dir = Path(args.run_dir)
    if args.files_from_env:
        write_files_from_env(run_dir)
    log_path = run_dir / "trainer.log"
    client = ReportClient(args.url, args.run_id, token, run_dir / "spool")
    tailer = OutputTailer(args.output_dir, log_path=log_path)
    return report_while_running(
        command,
        client,
        tailer,
        log_path=log_path,
        interval=args.interval,
        drain_seconds=args.drain_seconds,
    )


if __name__ == "__main__":
    sys.exit(main())
