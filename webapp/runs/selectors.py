"""Reads on runs and their metrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter

from django.db import connection
from django.db.models import Count, Exists, OuterRef, QuerySet

from webapp.runs import hooks
from webapp.runs.models import MetricPoint, Run
from webapp.runs.sparkline import sparkline_points


def run_list() -> QuerySet[Run]:
    return (
        Run.objects.select_related("dataset", "created_by")
        .annotate(n_trajectories=Count("trajectories"))
        .order_by("-created_at", "-id")  # Meta.ordering is not applied to GROUP BY queries
    )


def run_get(*, run_id: int) -> Run:
    return Run.objects.select_related("dataset", "index", "created_by", "base_run").get(pk=run_id)


def overlay_candidates(*, run: Run) -> QuerySet[Run]:
    """Other runs with logged metrics, newest first, to draw next to this one."""
    return (
        Run.objects.filter(Exists(MetricPoint.objects.filter(run_id=OuterRef("pk"))))
        .exclude(pk=run.pk)
        .only("id", "name", "method", "algorithm")
        .order_by("-created_at", "-id")[:50]
    )


def metric_points(
    *, run_id: int, key: str | None = None, since_step: int | None = None
) -> QuerySet[MetricPoint]:
    points = MetricPoint.objects.filter(run_id=run_id)
    if key:
        points = points.filter(key=key)
    if since_step is not None:
        points = points.filter(step__gt=since_step)
    return points.order_by("step", "key")


def metric_latest(*, run_id: int) -> dict[str, tuple[int, float]]:
    """The last logged value of every key: ``{key: (step, value)}``."""
    latest: dict[str, tuple[int, float]] = {}
    for key, step, value in (
        MetricPoint.objects.filter(run_id=run_id).order_by("key", "step").values_list("key", "step", "value")
    ):
        latest[key] = (step, value)
    return latest


# The runs list's headline numbers: trainer.callbacks' keys (a training run's latest logged step).
HEADLINE_KEYS = {
    "reward": "reward/mean",
    "accuracy": "accuracy",  # HiPRAG's CEM of the step's rollouts
    "searches": "searches/mean",  # HiPRAG Eq. 3
    "osr": "osr",  # HiPRAG Eq. 2
}
# An evaluation run has no metric points: its report's pooled row gives the same numbers (scoring.aggregates).
REPORT_KEYS = {"accuracy": "cem", "searches": "average_searches", "osr": "osr"}
TREND_STEPS = (
    20  # the trend line draws a key's points of its last 20 steps (20 points when logged every step)
)


@dataclass(frozen=True, slots=True)
class Headline:
    """One headline number of a run: its latest value (and step), and the trend of its newest points."""

    value: float | None
    step: int | None = None
    trend: tuple[float, ...] = ()

    @property
    def sparkline(self) -> str:
        return sparkline_points(self.trend)


def _newest_points(run_ids: Sequence[int], keys: Sequence[str]) -> list[tuple[int, str, int, float]]:
    """``(run, key, step, value)`` of the last :data:`TREND_STEPS` steps of each run's key, in one statement:
    each (run, key)'s last step (read from the unique (run, key, step) index alone), joined back to the points
    within :data:`TREND_STEPS` steps of it, which that index finds as a range. Only these points are read, however
    long the runs are (a window function would number every point of every run first)."""
    if not run_ids or not keys:
        return []
    table = connection.ops.quote_name(MetricPoint._meta.db_table)
    runs = ", ".join(["%s"] * len(run_ids))
    names = ", ".join(["%s"] * len(keys))
    sql = (
        f"SELECT p.run_id, p.key, p.step, p.value FROM {table} p JOIN ("
        f"SELECT run_id, key, MAX(step) AS last FROM {table} WHERE run_id IN ({runs}) AND key IN ({names}) "
        "GROUP BY run_id, key"
        ") m ON p.run_id = m.run_id AND p.key = m.key AND p.step > m.last - %s "
        "ORDER BY p.run_id, p.key, p.step"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*run_ids, *keys, TREND_STEPS])
        rows: list[tuple[int, str, int, float]] = cursor.fetchall()
    return rows


def run_headlines(*, run_ids: Sequence[int]) -> dict[int, dict[str, Headline]]:
    """Per run, :data:`HEADLINE_KEYS`' latest values with their points of the last :data:`TREND_STEPS` steps,
    in one query over the metric points (:func:`_newest_points`), and one over the evaluation runs' pooled report
    rows (read by the evaluation app, :func:`webapp.runs.hooks.summary_rows`). A run with neither has no entry."""
    by_key = {key: name for name, key in HEADLINE_KEYS.items()}
    found: dict[int, dict[str, Headline]] = {}
    points = _newest_points(list(run_ids), list(by_key))
    for (run_id, key), group in groupby(points, key=itemgetter(0, 1)):  # ordered by run, key, step
        rows = list(group)
        found.setdefault(run_id, {})[by_key[key]] = Headline(
            value=rows[-1][3], step=rows[-1][2], trend=tuple(row[3] for row in rows)
        )
    for run_id, row in hooks.summary_rows(run_ids).items():
        if run_id not in found:
            found[run_id] = {name: Headline(value=row.get(key)) for name, key in REPORT_KEYS.items()}
    return found


HEADLINE_COLUMNS = (
    ("reward", "reward", "the method's mean reward at the latest logged step"),
    (
        "accuracy",
        "accuracy",
        "CEM (HiPRAG's cover exact match) of the latest step's rollouts; eval runs: pooled CEM",
    ),
    ("searches", "#Search", "searches per trajectory (HiPRAG Eq. 3)"),
    ("osr", "OSR", "over-search rate over judged search steps (HiPRAG Eq. 2)"),
)


@dataclass(frozen=True, slots=True)
class HeadlineCell:
    text: str
    points: str  # an SVG polyline's points; "" draws no trend
    title: str


def _headline_text(name: str, value: float | None) -> str:
    if value is None:
        return "—"
    if name in ("accuracy", "osr"):
        return f"{100 * value:.1f}%"
    return f"{value:.2f}" if name == "searches" else f"{value:.3f}"


def headline_cells(headlines: dict[str, Headline]) -> list[HeadlineCell]:
    """A run's :data:`HEADLINE_COLUMNS` as the runs list prints them: rates in percent, with the trend line."""
    cells = []
    for name, _, help_text in HEADLINE_COLUMNS:
        headline = headlines.get(name)
        if headline is None:
            cells.append(HeadlineCell("—", "", help_text))
            continue
        where = f" · step {headline.step}" if headline.step is not None else ""
        trend = f" · trend of the last {len(headline.trend)} logged steps" if len(headline.trend) > 1 else ""
        cells.append(
            HeadlineCell(_headline_text(name, headline.value), headline.sparkline, help_text + where + trend)
        )
    return cells


SPREAD_KEY = "groups/spread_rate"  # trainer.rewards.group_metrics: share of GRPO groups whose rewards differ


def steps_without_spread(*, run_id: int) -> list[int]:
    """The training steps at which no GRPO group had reward spread (``groups/spread_rate`` = 0): every group's
    rewards were equal, so every advantage was 0 (GRPO's group-normalised advantage, DeepSeekMath Eq. 3), and the
    step's loss and gradient norm are 0: nothing was learnt from it."""
    return list(
        MetricPoint.objects.filter(run_id=run_id, key=SPREAD_KEY, value=0.0)
        .order_by("step")
        .values_list("step", flat=True)
    )
