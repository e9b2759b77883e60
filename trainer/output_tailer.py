"""What a trainer writes, read as batches: the new part of its output folder and log since the last read.

Standard library only (no Django, no torch). :class:`OutputTailer` reads what :mod:`trainer.callbacks` and
:mod:`trainer.progress` write (``metrics.jsonl``, ``samples.jsonl``, ``progress.json``) and the trainer's log and
turns the new part into one *batch*; :func:`split_batch` cuts a batch into requests of bounded size. The web app's
local supervisor reads a run's files with the same class and stores the batch with the same server-side function
(``webapp.training.ingest.store_batch``) that the HTTP endpoint calls (:mod:`trainer.ingest_client`): there is one
ingest path.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"  # trainer.callbacks.METRICS_FILE (not imported: it imports transformers)
SAMPLES_FILE = "samples.jsonl"
PROGRESS_FILE = "progress.json"  # trainer.progress.PROGRESS_FILE
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

Batch = dict[str, Any]


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
