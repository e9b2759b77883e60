from __future__ import annotations

import csv
import io
import json

import pytest

from tests.webapp.factories import JudgeVerdictFactory, RunFactory, StepFactory, TrajectoryFactory

pytestmark = pytest.mark.django_db


def test_it_filters_trajectories(api_client):
    run = RunFactory()
    right = TrajectoryFactory(
        run=run, exact_match=True, n_steps=2, n_searches=2, question__dataset__name="nq"
    )
    wrong = TrajectoryFactory(
        run=run, exact_match=False, n_steps=1, n_searches=0, question__dataset__name="hotpot"
    )
    TrajectoryFactory()  # another run

    def ids(query):
        response = api_client.get(f"/api/v1/trajectories/?run={run.pk}&{query}")
        assert response.status_code == 200, response.content
        return [row["id"] for row in response.json()["results"]]

    assert ids("") == [wrong.pk, right.pk]
    assert ids("correct=true") == [right.pk]
    assert ids("correct=false") == [wrong.pk]
    assert ids("dataset=hotpot") == [wrong.pk]
    assert ids("n_searches=2") == [right.pk]
    assert ids("min_searches=1&max_searches=5") == [right.pk]


def test_it_rejects_a_bad_filter(api_client):
    response = api_client.get("/api/v1/trajectories/?min_searches=many")
    assert response.status_code == 400
    assert "min_searches" in response.json()


def test_it_pages_up_to_500(api_client):
    TrajectoryFactory.create_batch(3)
    body = api_client.get("/api/v1/trajectories/?page_size=2").json()
    assert (body["count"], len(body["results"])) == (3, 2)
    assert body["next"]


def test_it_shows_a_trajectory_with_steps_verdicts_and_rewards(api_client):
    verdict = JudgeVerdictFactory(step__reward=0.75, outcome="true")
    JudgeVerdictFactory(step=None, trajectory=verdict.trajectory, detector="answer", judge_model="j")
    body = api_client.get(f"/api/v1/trajectories/{verdict.trajectory.pk}/").json()
    assert [step["reward"] for step in body["steps"]] == [0.75]
    assert body["steps"][0]["verdicts"][0]["detector"] == "over_search"
    assert body["steps"][0]["verdicts"][0]["outcome"] == "true"
    assert [v["detector"] for v in body["verdicts"]] == ["answer"]


def test_it_answers_404_for_a_missing_trajectory(api_client):
    assert api_client.get("/api/v1/trajectories/987654/").status_code == 404


def _steps(run, n):
    trajectory = TrajectoryFactory(run=run, total_reward=1.0, n_steps=n, n_searches=n)
    return [StepFactory(trajectory=trajectory, index=i, reward=i / 10) for i in range(n)]


def test_it_pages_step_rewards_by_keyset(api_client):
    run = RunFactory()
    steps = _steps(run, 5)
    _steps(RunFactory(), 2)  # not this run's
    first = api_client.get(f"/api/v1/runs/{run.pk}/step-rewards/?limit=3").json()
    assert [row["step_id"] for row in first["results"]] == [s.pk for s in steps[:3]]
    assert first["results"][1]["reward"] == 0.1
    second = api_client.get(first["next"]).json()
    assert [row["step_id"] for row in second["results"]] == [s.pk for s in steps[3:]]
    assert second["next"] is None


def test_it_caps_step_reward_pages_at_500(api_client):
    run = RunFactory()
    assert api_client.get(f"/api/v1/runs/{run.pk}/step-rewards/?limit=501").status_code == 400


def test_it_streams_step_rewards_as_jsonl(api_client):
    run = RunFactory()
    steps = _steps(run, 3)
    response = api_client.get(f"/api/v1/runs/{run.pk}/step-rewards.jsonl")
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"].startswith("application/jsonl")
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [(r["step_id"], r["step_index"], r["reward"]) for r in rows] == [
        (s.pk, s.index, s.reward) for s in steps
    ]


def test_it_streams_step_rewards_as_csv(api_client):
    run = RunFactory()
    _steps(run, 2)
    response = api_client.get(f"/api/v1/runs/{run.pk}/step-rewards.csv", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["step_index"], r["kind"], r["reward"]) for r in rows] == [
        ("0", "search", "0.0"),
        ("1", "search", "0.1"),
    ]


def test_it_answers_404_for_the_export_of_a_missing_run(api_client):
    assert api_client.get("/api/v1/runs/987654/step-rewards.csv").status_code == 404
