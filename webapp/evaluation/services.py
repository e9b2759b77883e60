"""Writes of evaluation runs: creation (enqueued on commit) and execution (rollouts, judges, storage, report).

Execution runs in one Celery task on the ``default`` queue. The judge calls are not split out to the ``judge``
queue: agent.evaluate overlaps them with the rollouts in one event loop (HiPRAG Appendix I), which a hand-off
to another worker would undo, and a judge endpoint is remote anyway (the worker only waits on it).

Questions go to :func:`agent.evaluate.evaluate_sync` in batches of ``spec.batch_size``; after each batch its
trajectories, the judge cache, the plans and the report so far are written in one transaction, the heartbeat and
log tail are updated, and a cancelled run stops there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from agent.backends import GenerationBackend
from agent.evaluate import EvaluationResult, Judges, evaluate_sync
from agent.rollout import PAPER_CONFIGS, Question
from scoring.aggregates import EvaluationReport as Report
from scoring.aggregates import TrajectoryOutcome, evaluation_report
from webapp.datasets.models import Dataset
from webapp.evaluation import components
from webapp.evaluation.models import EvaluationReport, EvaluationStats
from webapp.evaluation.records import trajectory_input
from webapp.evaluation.reporting import stored_acc
from webapp.evaluation.specs import EvaluationConfigError, EvaluationSpec, evaluation_spec_check
from webapp.evaluation.stores import PrefetchedJudgeCache, PrefetchedPlanStore
from webapp.runs.models import Run
from webapp.runs.services import RunStateError, run_create, run_mark_finished, run_mark_started
from webapp.trajectories.services import trajectory_bulk_create

logger = logging.getLogger(__name__)
LOG_TAIL_LINES = 40


@transaction.atomic
def evaluation_run_create(
    *,
    user: AbstractBaseUser | None,
    spec: EvaluationSpec,
    name: str = "",
    base_run_id: int | None = None,
    enqueue: bool = True,
) -> Run:
    """A pending eval run holding ``spec`` in its config; its task is queued once the transaction commits."""
    evaluation_spec_check(spec)
    datasets = list(Dataset.objects.filter(pk__in=spec.dataset_ids).values_list("pk", "name"))
    if len(datasets) != len(set(spec.dataset_ids)):
        raise EvaluationConfigError("datasets", "a chosen dataset no longer exists")
    names = dict(datasets)
    run = run_create(
        name=name or f"eval {spec.method} · {', '.join(names[i] for i in spec.dataset_ids)}",
        method=spec.method,
        model_name=spec.model,
        kind=Run.Kind.EVAL,
        dataset_id=spec.dataset_ids[0] if len(spec.dataset_ids) == 1 else None,
        config=spec.to_json(),
        created_by=user,
        base_run_id=base_run_id,
    )
    # run_create knows nothing of indexes and judges; the columns exist for every run, so fill them here.
    judge_settings = {k: v for k, v in asdict(spec.judge).items() if k != "api_key_env"}
    judge_settings["api_key_env"] = spec.judge.api_key_env  # the variable's NAME only, never the key
    Run.objects.filter(pk=run.pk).update(index_id=spec.index_id, judge_settings=judge_settings)
    run.index_id, run.judge_settings = spec.index_id, judge_settings
    if enqueue:
        from webapp.evaluation.tasks import evaluation_run_task

        transaction.on_commit(lambda: evaluation_run_task.delay(run.pk))
    return run


@dataclass(slots=True)
class _Totals:
    outcomes: list[TrajectoryOutcome] = field(default_factory=list)
    generation_tokens: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "completion": 0})
    judge_errors: int = 0
    reward_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, result: EvaluationResult) -> None:
        self.outcomes.extend(record.outcome() for record in result.records)
        for key, value in result.generation_tokens.items():
            self.generation_tokens[key] = self.generation_tokens.get(key, 0) + value
        self.judge_errors += sum(
            1
            for record in result.records
            for results in record.verdicts.values()
            for r in results
            if r.verdict is not None and not r.verdict.usable
        )
        self.reward_errors.extend(r.reward_error for r in result.records if r.reward_error)
        self.seconds += result.seconds


def evaluation_run_execute(*, run_id: int) -> Run:
    """Run a pending eval run to the end; a failure marks it failed with the error text (never raises)."""
    try:
        run_mark_started(run_id=run_id)
    except RunStateError as exc:  # a second delivery of the task (acks_late) or a cancelled run
        logger.info("evaluation run %s not started: %s", run_id, exc)
        return Run.objects.get(pk=run_id)
    try:
        _execute(Run.objects.get(pk=run_id))
    except Exception as exc:
        logger.exception("evaluation run %s failed", run_id)
        _log(run_id, f"failed: {type(exc).__name__}: {exc}")
        return run_mark_finished(
            run_id=run_id, status=Run.Status.FAILED, error=f"{type(exc).__name__}: {exc}"
        )
    return run_mark_finished(run_id=run_id)


def _execute(run: Run) -> None:
    spec = EvaluationSpec.from_json(run.config)
    evaluation_spec_check(spec)
    backend = components.build_backend(spec)
    try:
        _evaluate(run, spec, backend)
    finally:
        close = getattr(backend, "close", None)  # a vLLM engine's worker process ends with the run
        if close is not None:
            close()


def _evaluate(run: Run, spec: EvaluationSpec, backend: GenerationBackend) -> None:
    config = spec.rollout.apply(PAPER_CONFIGS[spec.method])
    searcher = components.build_searcher(spec)
    caches: dict[str, PrefetchedJudgeCache] = {}

    def cache_for(model: str) -> PrefetchedJudgeCache:
        if model not in caches:
            caches[model] = PrefetchedJudgeCache(model)
            caches[model].load()
        return caches[model]

    judges = components.build_judges(spec, backend, cache_for)
    plans = judges.plans
    assert isinstance(plans, PrefetchedPlanStore)
    datasets = Dataset.objects.in_bulk(spec.dataset_ids)
    totals = _Totals()
    _log(run.pk, f"evaluating {spec.method} on {len(spec.dataset_ids)} dataset(s), {spec.model}")
    for dataset_id in spec.dataset_ids:
        dataset = datasets[dataset_id]
        questions = _questions(dataset, spec.limit)
        done = 0
        for batch in _batches(questions, spec.batch_size):
            if _cancelled(run.pk):
                _log(run.pk, "cancelled: stopping before the next batch")
                return
            plans.load(int(q.id) for q in batch)
            result = evaluate_sync(
                backend,
                searcher,
                spec.method,
                batch,
                judges=judges,
                config=config,
                params=spec.params,
                batch_size=spec.batch_size,
            )
            totals.add(result)
            done += len(batch)
            _store_batch(run.pk, dataset, result, totals, judges, caches.values(), plans)
            _log(
                run.pk,
                f"{dataset.name}: {done}/{len(questions)} questions ({result.seconds:.1f} s for {len(batch)})",
            )
    if not totals.outcomes:
        _store_report(run.pk, evaluation_report([]), totals, judges)


def _questions(dataset: Dataset, limit: int | None) -> list[Question]:
    rows = dataset.questions.order_by("id").values_list("pk", "text", "golden_answers", "metadata")
    if limit is not None:
        rows = rows[:limit]
    return [
        Question(
            str(pk),
            text,
            tuple(golds),
            dataset.name,
            tuple(str(t) for t in (metadata or {}).get("supporting_titles") or ()),
        )
        for pk, text, golds, metadata in rows
    ]


def _batches(questions: Sequence[Question], size: int) -> Iterator[Sequence[Question]]:
    for start in range(0, len(questions), size):
        yield questions[start : start + size]


def _cancelled(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status=Run.Status.CANCELLED).exists()


@transaction.atomic
def _store_batch(
    run_id: int,
    dataset: Dataset,
    result: EvaluationResult,
    totals: _Totals,
    judges: Judges,
    caches: Any,
    plans: PrefetchedPlanStore,
) -> None:
    trajectory_bulk_create(
        items=[trajectory_input(r, run_id=run_id, dataset_id=dataset.pk) for r in result.records]
    )
    for cache in caches:
        cache.flush()
    plans.flush()
    _store_report(run_id, evaluation_report(totals.outcomes), totals, judges)


def _store_report(run_id: int, report: Report, totals: _Totals, judges: Judges) -> None:
    """Replace the run's report rows and totals with the ones over every trajectory so far."""
    EvaluationReport.objects.filter(run_id=run_id).delete()
    EvaluationReport.objects.bulk_create(
        EvaluationReport(run_id=run_id, dataset=row.dataset, position=position, row=asdict(row))
        for position, row in enumerate(report.rows())
    )
    EvaluationStats.objects.update_or_create(
        run_id=run_id,
        defaults={
            "judge_stats": {judge.model: judge.stats.as_dict() for judge in judges.all()},
            "generation_tokens": dict(totals.generation_tokens),
            "n_trajectories": len(totals.outcomes),
            "n_judge_errors": totals.judge_errors,
            "n_reward_errors": len(totals.reward_errors),
            "reward_error_examples": list(dict.fromkeys(totals.reward_errors))[:5],
            "seconds": totals.seconds,
        },
    )


def _log(run_id: int, line: str) -> None:
    """Append a line to the run's log tail (the run page shows it) and beat the heart."""
    now = timezone.now()
    stamped = f"{now:%H:%M:%S} {line}"
    with transaction.atomic():
        run = Run.objects.select_for_update().only("log_tail").get(pk=run_id)
        lines = [*run.log_tail.splitlines(), stamped][-LOG_TAIL_LINES:]
        Run.objects.filter(pk=run_id).update(log_tail="\n".join(lines), heartbeat_at=now)


def evaluation_report_ensure(*, run_id: int) -> bool:
    """Compute and store the report of a run that has scored trajectories but no report (an imported run, or one
    whose report was never written), from its stored trajectories and step verdicts; True when one was written.

    Verdicts are read as the aggregates take them (HiPRAG Eq. 2): over-search flags of search steps, under-search
    flags of non-search steps, in step order; ``error`` and ``unparseable`` stay what they are (counted, never
    read as "no").
    """
    from scoring.verdicts import Verdict
    from webapp.trajectories.judge_versions import primary_verdicts_q
    from webapp.trajectories.models import JudgeVerdict, Trajectory

    if EvaluationReport.objects.filter(run_id=run_id).exists():
        return False
    rows = list(
        Trajectory.objects.filter(run_id=run_id)
        .order_by("pk")
        .values_list(
            "pk",
            "dataset__name",
            "cover_exact_match",
            "exact_match",
            "f1",
            "format_ok",
            "n_searches",
            "final_answer",
            "golden_answers",
        )
    )
    if not rows:
        return False
    flags: dict[tuple[int, str], list[Verdict]] = {}
    verdicts = (
        JudgeVerdict.objects.filter(trajectory__run_id=run_id, detector__in=("over_search", "under_search"))
        .filter(primary_verdicts_q(run_id))  # one judge version's verdicts, never two mixed
        .order_by("trajectory_id", "step__index")
        .values_list("trajectory_id", "detector", "outcome")
    )
    for trajectory_id, detector, outcome in verdicts:
        flags.setdefault((trajectory_id, detector), []).append(Verdict(outcome))
    outcomes = [
        TrajectoryOutcome(
            dataset=dataset or "unnamed",
            cem=bool(cem),
            em=bool(em),
            f1=float(f1 or 0.0),
            format_ok=format_ok,
            n_searches=n_searches,
            over_search=tuple(flags.get((pk, "over_search"), ())),
            under_search=tuple(flags.get((pk, "under_search"), ())),
            acc=stored_acc(answer, golds),
        )
        for pk, dataset, cem, em, f1, format_ok, n_searches, answer, golds in rows
    ]
    report = evaluation_report(outcomes)
    EvaluationReport.objects.bulk_create(
        EvaluationReport(run_id=run_id, dataset=row.dataset, position=position, row=asdict(row))
        for position, row in enumerate(report.rows())
    )
    return True
