from __future__ import annotations

import pytest

from tests.webapp.factories import MetricPointFactory, RunFactory, TrajectoryFactory
from webapp.runs.services import run_log_metrics

pytestmark = pytest.mark.django_db


def test_it_lists_runs_with_their_trajectory_counts(api_client):
    run = RunFactory(name="hiprag-3b")
    TrajectoryFactory.create_batch(2, run=run)
    body = api_client.get("/api/v1/runs/").json()
    assert [(r["name"], r["n_trajectories"]) for r in body["results"]] == [("hiprag-3b", 2)]


def test_it_shows_a_run(api_client):
    run = RunFactory(config={"lr": 1e-6})
    body = api_client.get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["method"], body["config"]) == ("hiprag", {"lr": 1e-6})
    assert api_client.get("/api/v1/runs/987654/").status_code == 404


def test_it_returns_metrics_since_a_step(api_client):
    run = RunFactory()
    for step in range(5):
        run_log_metrics(run_id=run.pk, step=step, values={"reward/total": step / 10, "search/over_rate": 0.1})
    body = api_client.get(f"/api/v1/runs/{run.pk}/metrics/?key=reward/total&since_step=2").json()
    assert [(p["step"], p["value"]) for p in body["results"]] == [(3, 0.3), (4, 0.4)]
    assert len(api_client.get(f"/api/v1/runs/{run.pk}/metrics/?since_step=3").json()["results"]) == 2


def test_it_overwrites_a_metric_logged_twice():
    point = MetricPointFactory(step=1, key="kl", value=1.0)
    run_log_metrics(run_id=point.run_id, step=1, values={"kl": 2.0})
    point.refresh_from_db()
    assert point.value == 2.0
