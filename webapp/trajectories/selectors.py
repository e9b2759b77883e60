"""Reads on trajectories, steps and step rewards."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from django.db import connection
from django.db.models import Prefetch, QuerySet

from webapp.trajectories.models import JudgeVerdict, Step, Trajectory

STEP_REWARD_FIELDS = {
    # column name in the export -> ORM path
    "step_id": "id",
    "trajectory_id": "trajectory_id",
    "question_id": "trajectory__question__external_id",
    "training_step": "trajectory__training_step",
    "step_index": "index",
    "kind": "kind",
    "query": "query",
    "reward": "reward",
    "trajectory_reward": "trajectory__total_reward",
    "exact_match": "trajectory__exact_match",
}
STEP_REWARD_COLUMNS = tuple(STEP_REWARD_FIELDS)
# A page of the paginated endpoint holds the step's own columns only: one index range scan, no joins, a third of
# the bytes. Trajectory-level fields come from /trajectories/ (or the export, which has them all).
STEP_REWARD_PAGE_FIELDS = {
    name: STEP_REWARD_FIELDS[name]
    for name in ("step_id", "trajectory_id", "step_index", "kind", "query", "reward")
}
STEP_REWARD_PAGE_COLUMNS = tuple(STEP_REWARD_PAGE_FIELDS)


def trajectory_list(
    *,
    run_id: int | None = None,
    dataset: str | None = None,
    correct: bool | None = None,
    n_searches: int | None = None,
    min_searches: int | None = None,
    max_searches: int | None = None,
    training_step: int | None = None,
) -> QuerySet[Trajectory]:
    """Trajectories, newest first. ``correct`` is exact match against the golden answers."""
    rows = Trajectory.objects.select_related("question", "dataset")
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    if dataset:
        rows = rows.filter(dataset__name=dataset)
    if correct is not None:
        rows = rows.filter(exact_match=correct)
    if n_searches is not None:
        rows = rows.filter(n_searches=n_searches)
    if min_searches is not None:
        rows = rows.filter(n_searches__gte=min_searches)
    if max_searches is not None:
        rows = rows.filter(n_searches__lte=max_searches)
    if training_step is not None:
        rows = rows.filter(training_step=training_step)
    return rows.order_by("-id")


def trajectory_get(*, trajectory_id: int) -> Trajectory:
    """One trajectory with its steps, each step's verdicts, and the trajectory-level verdicts (four queries)."""
    return (
        Trajectory.objects.select_related("question", "dataset", "run")
        .prefetch_related(
            Prefetch(
                "steps",
                queryset=Step.objects.order_by("index").prefetch_related(
                    Prefetch("verdicts", queryset=JudgeVerdict.objects.select_related("version"))
                ),
            ),
            Prefetch(
                "verdicts",
                queryset=JudgeVerdict.objects.filter(step__isnull=True).select_related("version"),
                to_attr="trajectory_verdicts",
            ),
        )
        .get(pk=trajectory_id)
    )


def _step_rewards(run_id: int) -> QuerySet[Step]:
    return Step.objects.filter(run_id=run_id).order_by(
        "id"
    )  # Step.run is the trajectory's run, indexed with id


@functools.cache
def _step_reward_page_sql() -> str:
    """The page query, compiled by the ORM once per process: the endpoint serves pages to many concurrent trainers,
    and compiling the query again for every page cost as much CPU as running it."""
    query = _step_rewards(0).filter(id__gt=0).values_list(*STEP_REWARD_PAGE_FIELDS.values()).query
    sql, params = query.get_compiler(using="default").as_sql()
    if len(params) != 2:  # run id, then after: the order in which step_reward_page passes them
        raise RuntimeError(f"unexpected parameters in the step reward page query: {params!r}")
    return (
        f"{sql} LIMIT %s"  # the ORM inlines a slice's limit; a parameter lets one statement serve every page
    )


@functools.cache
def _step_reward_page_json_sql() -> str:
    """PostgreSQL builds the page as one JSON array (``json_agg``), with its last step id and row count: the web
    process then copies bytes and no Python object exists per row, which keeps a 500-step page at a few
    milliseconds of server CPU (docs/benchmarks.md)."""
    pairs = ", ".join(f"'{name}', p.c{i}" for i, name in enumerate(STEP_REWARD_PAGE_COLUMNS))
    columns = ", ".join(f"c{i}" for i in range(len(STEP_REWARD_PAGE_COLUMNS)))
    body = f"coalesce(json_agg(json_build_object({pairs}) ORDER BY p.c0), '[]')::text"
    return f"SELECT {body}, max(p.c0), count(*) FROM ({_step_reward_page_sql()}) AS p({columns})"


def step_reward_page_json(*, run_id: int, after: int = 0, limit: int = 500) -> tuple[bytes, int | None, int]:
    """One page of :func:`step_reward_page` as JSON array bytes, its last step id and its length."""
    if connection.vendor != "postgresql":  # SQLite (the demo): the rows through orjson
        import orjson

        rows = step_reward_page(run_id=run_id, after=after, limit=limit)
        return orjson.dumps(rows), (rows[-1]["step_id"] if rows else None), len(rows)
    with connection.cursor() as cursor:
        cursor.execute(_step_reward_page_json_sql(), [run_id, after, limit])
        text, last, count = cursor.fetchone()
    return text.encode(), last, count


def step_reward_page(*, run_id: int, after: int = 0, limit: int = 500) -> list[dict[str, Any]]:
    """One page of a run's step rewards in step-id order, starting after step id ``after`` (keyset pagination)."""
    with connection.cursor() as cursor:
        cursor.execute(_step_reward_page_sql(), [run_id, after, limit])
        return [dict(zip(STEP_REWARD_PAGE_COLUMNS, row, strict=True)) for row in cursor.fetchall()]


def step_reward_rows(*, run_id: int, chunk_size: int = 2000) -> Iterator[tuple[Any, ...]]:
    """Every step reward of a run, streamed from the database in chunks (a server-side cursor on PostgreSQL)."""
    return _step_rewards(run_id).values_list(*STEP_REWARD_FIELDS.values()).iterator(chunk_size=chunk_size)
