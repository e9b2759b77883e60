"""Re-judging a stored run: its trajectories' steps judged again by another judge, as a background job.

A HiPRAG run's stored trajectories are parsed again (``scoring.formats``) and put to HiPRAG's detectors
(``agent.judges``): the evidence heuristic (``evidence``), or an OpenAI-compatible endpoint (``openai``), which
answers the over-search re-ask (Sec. 3.2: the query as a standalone question) and judges with Fig. 5's and Fig. 6's
prompts. The new verdicts are stored beside the run's own under the new judge version
(``webapp.trajectories.judge_versions``): nothing of the run is replaced, and the report shows both versions'
rates, their agreement with each other and with the audit (``webapp.audits.correction``).

The job stores its progress after every batch of trajectories; the endpoint client retries failed calls with
backoff (``agent.judge_client``, counted as retries), and a call that still fails, or a reply the parser cannot
read, is stored as an ``error`` verdict with its text, never as a "no". Tokens in and out, latency and, where the
user set a price for the judge model (``JudgePrice``), money are recorded on the job.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agent import judges as det
from agent.judge_client import ChatJudge, JudgeStats, OpenAIJudge
from agent.judge_spec import REJUDGE, JudgeKind, JudgeSpec, JudgeSpecError, judge_spec_check, kinds_for
from scoring import formats
from scoring.judging import evidence
from scoring.verdicts import Verdict
from webapp.evaluation.models import JudgePrice, RejudgeJob
from webapp.runs.models import Run
from webapp.trajectories.judge_versions import judge_spec, judge_version_get_or_create
from webapp.trajectories.models import JudgeVerdict, Trajectory

logger = logging.getLogger(__name__)
KINDS = kinds_for(REJUDGE)  # agent.judge_spec.KINDS: the kinds a stored run can be judged again by
# What a re-judge job stores of its judge (only the sampling settings given); the spec check bounds each.
SETTINGS = ("kind", "base_url", "model", "api_key_env", "temperature", "timeout", "max_tokens", "max_retries")
BATCH_SIZE = 16
N_ERROR_EXAMPLES = 5
_OUTCOMES = {
    Verdict.TRUE: "true",
    Verdict.FALSE: "false",
    Verdict.UNPARSEABLE: "error",
    Verdict.ERROR: "error",
}


def rejudge_judge_check(judge: Mapping[str, Any]) -> dict[str, Any]:
    """The judge settings a re-judge stores (an ``agent.judge_spec.JudgeSpec`` of a kind offered for a re-judge,
    with the settings given; never a key: only the NAME of its environment variable); a ``ValidationError`` naming
    the field otherwise."""
    given = {k: v for k, v in judge.items() if v is not None and k in SETTINGS}
    for name in ("temperature", "timeout"):  # numbers as a form or JSON gives them ("0.5" too)
        if name in given and not isinstance(given[name], bool):
            try:
                given[name] = float(given[name])
            except (TypeError, ValueError):
                raise ValidationError({name: "expected a number"}) from None
    for name in ("base_url", "model", "api_key_env"):
        given[name] = str(given.get(name) or "").strip()
    spec = JudgeSpec.from_json(given, default_kind="")
    try:
        judge_spec_check(spec, REJUDGE)
    except JudgeSpecError as exc:
        raise ValidationError({exc.field: exc.message}) from None
    if spec.kind == JudgeKind.EVIDENCE:
        return {"kind": spec.kind}
    settings: dict[str, Any] = {
        "kind": spec.kind,
        "base_url": spec.base_url,
        "model": spec.model,
        "api_key_env": spec.api_key_env,
    }
    return {**settings, **{name: getattr(spec, name) for name in SETTINGS[4:] if name in given}}


def _version_spec(run: Run, judge: Mapping[str, Any]) -> dict[str, Any]:
    if judge["kind"] == "evidence":
        return judge_spec(method=run.method, judge_model=evidence.JUDGE_MODEL, settings={"judge": "evidence"})
    sampling = {
        "kind": "openai",
        "temperature": judge.get("temperature", 0.0),
        "max_tokens": judge.get("max_tokens"),
    }
    return judge_spec(method=run.method, judge_model=judge["model"], settings=sampling)


@transaction.atomic
def rejudge_create(
    *, run: Run, judge: Mapping[str, Any], user: AbstractBaseUser | None = None, enqueue: bool = True
) -> RejudgeJob:
    """A pending re-judge of ``run`` with ``judge``; its task is queued once the transaction commits."""
    if run.method != "hiprag":
        raise ValidationError(
            {"run": f"re-judging needs HiPRAG's step detectors; run {run.pk} is {run.method}"}
        )
    if run.is_active:
        raise ValidationError({"run": f"run {run.pk} is still {run.status}: re-judge it once it has ended"})
    settings = rejudge_judge_check(judge)
    n = Trajectory.objects.filter(run=run).count()
    if not n:
        raise ValidationError({"run": f"run {run.pk} has no stored trajectory to judge"})
    version = judge_version_get_or_create(_version_spec(run, settings))
    job = RejudgeJob.objects.create(
        run=run, judge=settings, version=version, n_trajectories=n, created_by=user if user else None
    )
    if enqueue:
        from webapp.evaluation.tasks import judge_rejudge_task

        transaction.on_commit(lambda: judge_rejudge_task.delay(job.pk))
    return job


def _openai_judge(settings: Mapping[str, Any]) -> ChatJudge:
    return OpenAIJudge(JudgeSpec.from_json(settings).endpoint(), stats=JudgeStats())


JudgeFactory = Callable[[Mapping[str, Any]], ChatJudge]


def _results(
    settings: Mapping[str, Any], judge: ChatJudge | None, batch: Sequence[tuple[Trajectory, Any]]
) -> list[list[det.JudgeResult]]:
    """Per trajectory of the batch, its HiPRAG detector results."""
    if settings["kind"] == "evidence":
        found = []
        for row, parsed in batch:
            titles = (row.question.metadata or {}).get("supporting_titles", []) if row.question else []
            by = det.hiprag_evidence(parsed, row.question_text, row.golden_answers or [], titles)
            found.append([*by[det.OVER_SEARCH], *by[det.UNDER_SEARCH]])
        return found
    assert judge is not None
    parsed_list = [parsed for _, parsed in batch]

    async def run_all() -> list[list[det.JudgeResult]]:
        over = await det.hiprag_over_search(None, judge, parsed_list, regenerator=judge)
        under = await asyncio.gather(*(det.hiprag_under_search(judge, parsed) for parsed in parsed_list))
        return [[*o, *u] for o, u in zip(over, under, strict=True)]

    return asyncio.run(run_all())


def _reply(result: det.JudgeResult) -> str:
    if result.verdict is Verdict.ERROR:
        return f"error: {result.error or 'unknown'}"
    if result.verdict is Verdict.UNPARSEABLE:
        return f"unparseable ({result.error or 'not in the expected format'}): {result.reply or ''}"
    return result.reply or ""


def rejudge_execute(*, job_id: int, judge_factory: JudgeFactory = _openai_judge) -> RejudgeJob:
    """Run a pending re-judge to the end (never raises: a failure marks the job failed with its text)."""
    claimed = RejudgeJob.objects.filter(pk=job_id, status=RejudgeJob.Status.PENDING).update(
        status=RejudgeJob.Status.RUNNING
    )
    job = RejudgeJob.objects.select_related("run", "version").get(pk=job_id)
    if not claimed:  # a second delivery of the task
        return job
    started = time.monotonic()
    try:
        _execute(job, judge_factory, started)
    except Exception as exc:
        logger.exception("re-judge %s failed", job_id)
        RejudgeJob.objects.filter(pk=job_id).update(
            status=RejudgeJob.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            seconds=time.monotonic() - started,
            finished_at=timezone.now(),
        )
    else:
        RejudgeJob.objects.filter(pk=job_id).update(
            status=RejudgeJob.Status.FINISHED, seconds=time.monotonic() - started, finished_at=timezone.now()
        )
    job.refresh_from_db()
    return job


def _execute(job: RejudgeJob, judge_factory: JudgeFactory, started: float) -> None:
    settings = job.judge
    judge = judge_factory(settings) if settings["kind"] == "openai" else None
    assert job.version is not None
    ids = list(Trajectory.objects.filter(run_id=job.run_id).order_by("pk").values_list("pk", flat=True))
    done = n_verdicts = n_errors = 0
    latency = 0.0
    examples: list[str] = []
    for start in range(0, len(ids), BATCH_SIZE):
        rows = list(
            Trajectory.objects.filter(pk__in=ids[start : start + BATCH_SIZE])
            .select_related("question")
            .prefetch_related("steps")
            .order_by("pk")
        )
        batch = [(row, formats.parse(row.format, row.raw_text)) for row in rows]
        results = _results(settings, judge, batch)
        verdicts = []
        for (row, _), found in zip(batch, results, strict=True):
            steps = {step.index: step.pk for step in row.steps.all()}
            for result in found:
                if result.step_index not in steps or result.verdict is None:
                    continue
                outcome = _OUTCOMES[result.verdict]
                if outcome == "error":
                    n_errors += 1
                    if len(examples) < N_ERROR_EXAMPLES:
                        examples.append(
                            f"trajectory {row.pk} step {result.step_index}: {_reply(result)[:300]}"
                        )
                latency += result.latency
                verdicts.append(
                    JudgeVerdict(
                        trajectory_id=row.pk,
                        step_id=steps[result.step_index],
                        detector=result.detector,
                        outcome=outcome,
                        raw_reply=_reply(result),
                        judge_model=result.model or job.version.model,
                        version=job.version,
                        latency_ms=round(result.latency * 1000),
                        prompt_tokens=result.prompt_tokens or None,
                        completion_tokens=result.completion_tokens or None,
                    )
                )
        # A step this version already judged (an earlier re-judge with the same settings) keeps its verdict.
        JudgeVerdict.objects.bulk_create(verdicts, ignore_conflicts=True)
        done += len(rows)
        n_verdicts += len(verdicts)
        stats = judge.stats if judge is not None else JudgeStats()
        RejudgeJob.objects.filter(pk=job.pk).update(
            n_done=done,
            n_verdicts=n_verdicts,
            n_errors=n_errors,
            n_retries=stats.retries,
            n_calls=stats.calls,
            prompt_tokens=stats.prompt_tokens,
            completion_tokens=stats.completion_tokens,
            latency_seconds=stats.latency_seconds or latency,
            seconds=time.monotonic() - started,
            error_examples=examples,
        )


def judge_cost(model: str, prompt_tokens: int, completion_tokens: int) -> tuple[float, str] | None:
    """Money for these tokens at the price the user set for ``model`` (``JudgePrice``); None without a price."""
    price = JudgePrice.objects.filter(model=model).first()
    if price is None:
        return None
    return price.cost(prompt_tokens, completion_tokens), price.currency


def evaluation_judge_costs(judge_stats: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, float, str]]:
    """(judge model, money, currency) of an evaluation's judge calls (``EvaluationStats.judge_stats``), for the
    models the user set a price for."""
    found = []
    for model, stats in sorted(judge_stats.items()):
        cost = judge_cost(model, int(stats.get("prompt_tokens", 0)), int(stats.get("completion_tokens", 0)))
        if cost is not None:
            found.append((model, cost[0], cost[1]))
    return found
