"""What trainers report, stored: one path for the local supervisor's file tailing and the HTTP ingest endpoint.

The reading of a trainer's files is :mod:`trainer.report_client` (standard library only, so a trainer on another
machine runs the same code); :func:`store_batch` stores one batch, idempotently per (run, step, key) for metrics and
per (run, sample key) for samples. The local supervisor calls it with what it read from disk; the endpoint
``POST /api/v1/runs/<id>/ingest/`` calls it with what a remote trainer's client sent.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from django.core import signing
from django.db import transaction
from django.utils import timezone

from scoring import formats
from trainer import report_client
from trainer.placement import CONFIG_KEY, Placement
from trainer.report_client import is_noise, log_tail, metric_rows
from webapp.runs.models import MetricPoint, Run
from webapp.training import reporting
from webapp.training.ingest_rows import Refusal, RowError, check_metric, check_sample, sample_key_of
from webapp.training.trackers import mirror_metrics
from webapp.trajectories.chat import sample_format
from webapp.trajectories.services import TrajectoryInput, VerdictInput, trajectory_bulk_create

logger = logging.getLogger(__name__)

__all__ = [
    "is_noise",
    "log_tail",
    "metric_rows",
    "read_new_lines",
    "read_progress",
    "sample_input",
    "store_batch",
]

LOG_TAIL_LINES = report_client.LOG_TAIL_LINES
OUTCOMES = ("true", "false", "error")
TOKEN_SALT = "searchlab.training.ingest"


def read_new_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete JSON lines appended after byte ``offset``, and the offset after the last complete line
    (:func:`trainer.report_client.read_new_lines` without the lines' offsets)."""
    rows, end = report_client.read_new_lines(path, offset)
    return [row for _, row in rows], end


def read_progress(output_dir: Path) -> dict[str, Any] | None:
    """The trainer's newest heartbeat (trainer.progress), or None."""
    return report_client.read_progress(output_dir)


# --- the run-scoped token ---------------------------------------------------------------------------------------


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


# --- storing a batch --------------------------------------------------------------------------------------------


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


def _store_samples(
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
    from webapp.training.models import IngestedSample

    seen = set(
        IngestedSample.objects.filter(run_id=run_id, key__in=list(wanted)).values_list("key", flat=True)
    )
    new = {key: value for key, value in wanted.items() if key not in seen}
    stored_keys: list[str] = []
    if new:
        positions = {sample_key_of(s): i for i, s in enumerate(lists["samples"])}
        stored_keys, failed = _store_samples(run, new, {k: v for k, v in positions.items() if k})
        refused += failed
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
    Run.objects.filter(pk=run_id).update(**fields)
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
        "samples_duplicate": len(wanted) - len(new) + repeated,
        "refused": [r.as_dict() for r in refused],
        "stop": Run.objects.filter(pk=run_id, stop_requested_at__isnull=False).exists(),
    }


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
