"""The runs list's headline numbers and trend lines, and the run page's notice of steps without reward spread."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from tests.webapp.factories import RunFactory
from webapp.evaluation.models import EvaluationReport
from webapp.runs.models import MetricPoint, Run
from webapp.runs.selectors import TREND_STEPS, run_headlines
from webapp.runs.sparkline import sparkline_points

pytestmark = pytest.mark.django_db


def _log(run: Run, key: str, values: list[float]) -> None:
    now = timezone.now()
    MetricPoint.objects.bulk_create(
        MetricPoint(run=run, key=key, step=step, value=value, wall_time=now)
        for step, value in enumerate(values, start=1)
    )


def test_it_draws_a_trend_scaled_to_its_range() -> None:
    points = [tuple(map(float, p.split(","))) for p in sparkline_points([1.0, 3.0, 2.0]).split()]
    assert [x for x, _ in points] == sorted(x for x, _ in points)  # left to right in step order
    assert points[1][1] < points[2][1] < points[0][1]  # highest value on top (SVG y grows downwards)
    assert sparkline_points([0.5]) == "" and sparkline_points([]) == ""
    flat = sparkline_points([0.2, 0.2])
    assert len({p.split(",")[1] for p in flat.split()}) == 1


def test_it_gives_each_run_its_latest_numbers_and_newest_points() -> None:
    train = RunFactory(name="grpo", kind=Run.Kind.TRAIN, algorithm="grpo")
    rewards = [i / 100 for i in range(TREND_STEPS + 10)]
    _log(train, "reward/mean", rewards)
    _log(train, "accuracy", [0.25, 0.5])
    _log(train, "searches/mean", [2.0, 1.5, 1.25])
    _log(train, "loss", [3.0, 2.0])  # not a headline
    evaluated = RunFactory(name="eval")
    EvaluationReport.objects.create(
        run=evaluated, dataset="overall", position=0, row={"cem": 0.5, "average_searches": 1.0, "osr": None}
    )
    quiet = RunFactory(name="quiet")

    found = run_headlines(run_ids=[train.pk, evaluated.pk, quiet.pk])

    reward = found[train.pk]["reward"]
    assert (reward.value, reward.step) == (rewards[-1], len(rewards))
    assert reward.trend == tuple(rewards[-TREND_STEPS:])  # the newest points, oldest first
    assert found[train.pk]["accuracy"].trend == (0.25, 0.5) and "osr" not in found[train.pk]
    assert found[evaluated.pk]["accuracy"].value == 0.5 and found[evaluated.pk]["osr"].value is None
    assert quiet.pk not in found


def test_the_runs_list_shows_the_numbers_with_trend_lines(
    researcher_client: Any, django_assert_max_num_queries: Any
) -> None:
    train = RunFactory(name="grpo", kind=Run.Kind.TRAIN, algorithm="grpo")
    _log(train, "reward/mean", [0.1, 0.3, 0.6])
    _log(train, "accuracy", [0.25, 0.5])
    _log(train, "searches/mean", [2.0, 1.25])
    _log(train, "osr", [0.4, 0.125])
    for i in range(10):
        _log(RunFactory(name=f"other{i}", kind=Run.Kind.TRAIN, algorithm="grpo"), "reward/mean", [0.1, 0.2])

    with django_assert_max_num_queries(8):  # the same number of queries for 11 runs as for 1
        page = researcher_client.get("/").content.decode()

    row = page[page.index(">grpo</a>") :]
    row = row[: row.index("</tr>")]
    for text in (">0.600<", ">50.0%<", ">1.25<", ">12.5%<"):
        assert text in row
    assert row.count("<polyline points=") == 4
    assert page.count('<svg class="sparkline"') == 4 + 10


def test_the_run_page_says_which_steps_had_no_reward_spread(researcher_client: Any) -> None:
    run = RunFactory(name="flat", kind=Run.Kind.TRAIN, algorithm="grpo")
    _log(run, "groups/spread_rate", [0.0, 0.5, 0.0])
    _log(run, "loss", [0.0, 0.2, 0.0])

    page = researcher_client.get(f"/runs/{run.pk}/").content.decode()

    assert "step 1: no group had reward spread — nothing to learn from this step" in page
    assert "step 3: no group had reward spread" in page and "step 2: no group" not in page

    spread = RunFactory(name="spread", kind=Run.Kind.TRAIN, algorithm="grpo")
    _log(spread, "groups/spread_rate", [0.5])
    assert "no group had reward spread" not in researcher_client.get(f"/runs/{spread.pk}/").content.decode()


def test_the_runs_list_shows_a_local_model_path_by_its_last_part(researcher_client: Any) -> None:
    path = "/srv/work/var/models/SmolLM2-135M-Instruct-warm"
    RunFactory(name="warm", kind=Run.Kind.TRAIN, algorithm="grpo", model_name=path)
    RunFactory(name="hub", model_name="HuggingFaceTB/SmolLM2-135M-Instruct")

    page = researcher_client.get("/").content.decode()

    assert f'<td class="model" title="{path}">SmolLM2-135M-Instruct-warm</td>' in page
    assert 'title="HuggingFaceTB/SmolLM2-135M-Instruct">SmolLM2-135M-Instruct</td>' in page


def test_runs_slash_leads_to_the_runs_list(researcher_client: Any) -> None:
    response = researcher_client.get("/runs/")

    assert response.status_code == 302 and response.headers["Location"] == "/"
    assert ">Runs</h1>" in researcher_client.get("/runs/", follow=True).content.decode()
