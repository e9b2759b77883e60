"""What trainers report, stored: one path for the local supervisor's file tailing and the HTTP ingest endpoint.

The reading of a trainer's files is :mod:`trainer.report_client` (standard library only, so a trainer on another
machine runs the same code); :func:`store_batch` stores one batch, idempotently per (run, step, key) for metrics and
per (run, sample key) for samples. The local supervisor calls it with what it read from disk; the endpoint
``POST /api/v1/runs/<id>/ingest/`` calls it with what a remote trainer's client sent. Samples are stored by
:mod:`webapp.training.ingest_samples`; the run-scoped token is :mod:`webapp.training.ingest_tokens`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from trainer import report_client
from trainer.placement import CONFIG_KEY, Placement
from trainer.report_client import is_noise, log_tail, metric_rows
from webapp.runs.models import MetricPoint, Run
from webapp.training import reporting
from webapp.training.ingest_rows import Refusal, RowError, check_metric, sample_key_of
from webapp.training.ingest_samples import checked_samples, judge_model_for, sample_input, store_samples
from webapp.training.ingest_tokens import TOKEN_SALT, ingest_token, run_refusal, token_refusal, token_run_id
from webapp.training.trackers import mirror_metrics

logger = logging.getLogger(__name__)

__all__ = [
    "TOKEN_SALT",
    "checked_samples",
    "ingest_token",
    "is_noise",
    "judge_model_for",
    "log_tail",
    "metric_rows",
    "read_new_lines",
    "read_progress",
    "run_refusal",
    "sample_input",
    "store_batch",
    "token_refusal",
    "token_run_id",
]

LOG_TAIL_LINES = report_client.LOG_TAIL_LINES


def read_new_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete JSON lines appended after byte ``offset``, and the offset after the last complete line
    (:func:`trainer.report_client.read_new_lines` without the lines' offsets)."""
    rows, end = report_client.read_new_lines(path, offset)
    return [row for _, row in rows], end


def read_progress(output_dir: Path) -> dict[str, Any] | None:
    """The trainer's newest heartbeat (trainer.progress), or None."""
    return report_client.read_progress(output_dir)


def checked_metrics(rows: Any) -> tuple[list[dict[str, Any]], list[Refusal]]:
    """The valid metric rows (normalised) and a refusal for each other one (ingest_rows.check_metric)."""
    kept: list[dict[str, Any]] = []
    refused: list[Refusal] = []
    for index, row in enumerate(rows or ()):
        try:
            kept.append(check_metric(row))
        except RowError as exc:
            refused.append(Refusal("metrics", index, exc.field, exc.reason))
    return kept, refused


def _store_checked_metrics(run_id: int, rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """Insert checked rows; a (run, step, key) stored before keeps its value (a replay never overwrites it).
    Returns (new points, points already stored)."""
    # One point per (step, key), the batch's last: a trainer may log a key twice at one step (TRL's summary repeats
    # ``epoch``), and PostgreSQL refuses to touch a row twice in one statement.
    latest = {(int(row["step"]), str(row["key"])): row for row in rows}
    if not latest:
        return 0, 0
    existing = set(
        MetricPoint.objects.filter(
            run_id=run_id, step__in={s for s, _ in latest}, key__in={k for _, k in latest}
        ).values_list("step", "key")
    )
    points = [
        MetricPoint(
            run_id=run_id,
            step=step,
            key=key,
            value=float(row["value"]),
            wall_time=dt.datetime.fromtimestamp(float(row["time"]), tz=dt.UTC),
        )
        for (step, key), row in latest.items()
        if (step, key) not in existing
    ]
    MetricPoint.objects.bulk_create(points, ignore_conflicts=True, batch_size=2000)
    return len(points), len(latest) - len(points)


def store_metrics(run_id: int, rows: Sequence[Mapping[str, Any]]) -> int:
    """Store metrics.jsonl rows ({"step", "time", "key", "value"}); invalid rows are logged and left out. The number
    of new points."""
    kept, refused = checked_metrics(rows)
    for refusal in refused[:5]:
        logger.warning(
            "run %s: metric row %s refused: %s %s", run_id, refusal.index, refusal.field, refusal.reason
        )
    return _store_checked_metrics(run_id, kept)[0]


def bounded_log_tail(text: str, limit: int | None = None) -> str:
    """The last ``limit`` bytes (INGEST_LOG_TAIL_BYTES, 64 KB) of a log tail, cut at a line start."""
    limit = reporting.log_tail_bytes() if limit is None else limit
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    cut = data[len(data) - limit :]
    newline = cut.find(b"\n")
    if 0 <= newline < len(cut) - 1:
        cut = cut[newline + 1 :]
    return cut.decode("utf-8", errors="ignore")


MAX_PROGRESS_BYTES = 64 * 1024
MAX_ERROR_CHARS = 20_000


@transaction.atomic
def store_batch(*, run_id: int, batch: Mapping[str, Any]) -> dict[str, Any]:
    """Store one batch (trainer.report_client.OutputTailer.read's shape), each row checked on its own
    (:mod:`webapp.training.ingest_rows`): valid metric rows are inserted per (run, step, key) — a point stored
    before keeps its value; valid samples whose ``key`` this run has not stored yet become trajectories (a key seen
    before is skipped, so a replayed batch stores nothing twice; a refused sample takes no key, so its corrected
    resend is stored); the heartbeat, progress and log tail (its last INGEST_LOG_TAIL_BYTES) replace the run's.

    Returns the counts, ``refused`` (``{"kind", "index", "field", "reason"}`` for every row or field not stored)
    and ``stop`` (a researcher asked the run to stop). The run's row is locked for the batch, so two deliveries of
    one batch are stored one after the other; the unique constraint on (run, key) is the last guard. ``final``
    ("finished" | "failed") ends a run whose executor is ``external`` (cancelled when a Stop was asked), also one
    marked crashed for its silence (webapp.training.reporting).
    """
    run = Run.objects.select_for_update().get(pk=run_id)
    refused: list[Refusal] = []
    lists: dict[str, Any] = {}
    for name in ("metrics", "samples"):
        value = batch.get(name)
        if value is not None and not isinstance(value, list):
            refused.append(Refusal("batch", None, name, f"must be a list, got {type(value).__name__}"))
            value = None
        lists[name] = value or []
    metrics, metric_refusals = checked_metrics(lists["metrics"])
    refused += metric_refusals
    stored_metrics, duplicate_metrics = _store_checked_metrics(run_id, metrics)
    mirror_metrics(run, metrics)  # its experiment trackers, for a run reported over HTTP
    wanted, repeated, sample_refusals = checked_samples(lists["samples"], method=run.method)
    refused += sample_refusals
    stored_keys, n_new = _store_new_samples(run, wanted, lists["samples"], refused)
    Run.objects.filter(pk=run_id).update(**_run_fields(batch, refused))
    final = batch.get("final")
    if final is not None and final not in ("finished", "failed"):
        refused.append(
            Refusal("batch", None, "final", f"must be 'finished' or 'failed', got {final!r}"[:200])
        )
    elif (
        final is not None
        and (run.config or {}).get(CONFIG_KEY) == Placement.EXTERNAL
        and reporting.accepts_reports(run)
    ):
        _end_external(run, final=final, error=batch.get("error"))
    if refused:
        logger.warning(
            "run %s: %d row(s)/field(s) refused, e.g. %s",
            run_id,
            len(refused),
            "; ".join(f"{r.kind}[{r.index}].{r.field}: {r.reason}" for r in refused[:3]),
        )
    return {
        "metrics": stored_metrics,
        "metrics_duplicate": duplicate_metrics,
        "samples": len(stored_keys),
        "samples_new": len(stored_keys),
        "samples_duplicate": len(wanted) - n_new + repeated,
        "refused": [r.as_dict() for r in refused],
        "stop": Run.objects.filter(pk=run_id, stop_requested_at__isnull=False).exists(),
    }


def _store_new_samples(
    run: Run,
    wanted: Mapping[str, tuple[Mapping[str, Any], Any]],
    samples: Sequence[Any],
    refused: list[Refusal],
) -> tuple[list[str], int]:
    """Store the checked samples whose key this run has not stored yet; the keys stored and how many were new.
    A sample the database refuses is added to ``refused``."""
    from webapp.training.models import IngestedSample

    seen = set(
        IngestedSample.objects.filter(run_id=run.pk, key__in=list(wanted)).values_list("key", flat=True)
    )
    new = {key: value for key, value in wanted.items() if key not in seen}
    stored_keys: list[str] = []
    if new:
        positions = {sample_key_of(s): i for i, s in enumerate(samples)}
        stored_keys, failed = store_samples(run, new, {k: v for k, v in positions.items() if k})
        refused += failed
    return stored_keys, len(new)


def _run_fields(batch: Mapping[str, Any], refused: list[Refusal]) -> dict[str, Any]:
    """The run's heartbeat, log tail and progress from a batch; a field of the wrong shape is added to ``refused``."""
    fields: dict[str, Any] = {"heartbeat_at": timezone.now()}
    tail = batch.get("log_tail")
    if isinstance(tail, str):
        fields["log_tail"] = bounded_log_tail(tail)
    elif tail is not None:
        refused.append(Refusal("batch", None, "log_tail", f"must be a string, got {type(tail).__name__}"))
    progress = batch.get("progress")
    if isinstance(progress, Mapping):
        try:
            size = len(json.dumps(progress, allow_nan=False))
        except (TypeError, ValueError, RecursionError):
            size = -1
        if 0 <= size <= MAX_PROGRESS_BYTES:
            fields["progress"] = dict(progress)
        else:
            reason = f"must be a JSON object of at most {MAX_PROGRESS_BYTES} bytes with finite numbers"
            refused.append(Refusal("batch", None, "progress", reason))
    elif progress is not None:
        refused.append(
            Refusal("batch", None, "progress", f"must be a JSON object, got {type(progress).__name__}")
        )
    return fields


def _end_external(run: Run, *, final: str, error: Any) -> None:
    """The trainer's final status: it wins over a crash guessed from silence; after a Stop it is ``cancelled``."""
    from webapp.runs.services import run_mark_finished

    status = Run.Status.FINISHED if final == "finished" else Run.Status.FAILED
    text = str(error or "")[:MAX_ERROR_CHARS]
    if run.stop_requested_at is not None:
        status, text = Run.Status.CANCELLED, ""  # its exit status is the stop's (SIGINT), not an error
    if reporting.ended_by_quiet(run):
        Run.objects.filter(pk=run.pk).update(status=status, error=text, finished_at=timezone.now())
        return
    run_mark_finished(run_id=run.pk, status=status, error=text)
