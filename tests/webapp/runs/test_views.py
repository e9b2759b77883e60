from __future__ import annotations

import pytest

from tests.webapp.factories import MetricPointFactory, RunFactory, StepFactory, TrajectoryFactory
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def test_it_lists_runs_on_the_dashboard(researcher_client):
    RunFactory(name="hiprag-qwen-3b")
    response = researcher_client.get("/")
    assert response.status_code == 200
    assert b"hiprag-qwen-3b" in response.content


def test_the_dashboard_shows_an_active_runs_phase_and_eta(researcher_client):
    """A warm start caching its frozen layers has no step count yet: its phase, without a "step 0 of 0"."""
    caching = {
        "phase": "train",
        "done": 18,
        "total": 107,
        "detail": "the frozen layers, once per demonstration",
    }
    RunFactory(name="warm", status=Run.Status.RUNNING, progress={**caching, "step": 0, "max_steps": 0})
    training = {"phase": "update", "step": 12, "max_steps": 42, "eta_seconds": 2040, "time": 4102444800.0}
    RunFactory(name="grpo", status=Run.Status.RUNNING, progress=training)
    page = researcher_client.get("/").content.decode()
    assert "training: batch 18 of 107 (the frozen layers, once per demonstration)" in page
    assert "step 0 of 0" not in page
    assert "step 12 of 42 · updating the policy · about 34 min left" in page


def test_it_shows_a_run_page(researcher_client):
    trajectory = TrajectoryFactory(question_text="Who wrote Hamlet?")
    MetricPointFactory(run=trajectory.run, key="search/over_rate", value=0.125)
    response = researcher_client.get(f"/runs/{trajectory.run.pk}/")
    assert response.status_code == 200
    assert "runs/run_detail.html" in [t.name for t in response.templates]
    assert b"Who wrote Hamlet?" in response.content
    assert b"search/over_rate" in response.content


def test_it_stops_a_run_from_the_page(researcher_client):
    run = RunFactory(status=Run.Status.RUNNING)
    response = researcher_client.post(f"/runs/{run.pk}/cancel/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert b"cancelled" in response.content
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED


def test_it_shows_a_trajectory_page(researcher_client):
    step = StepFactory(query="capital of France", context="Paris is the capital of France.")
    response = researcher_client.get(f"/trajectories/{step.trajectory.pk}/")
    assert response.status_code == 200
    assert b"capital of France" in response.content
    assert b"<details><summary>retrieved context</summary>" in response.content
