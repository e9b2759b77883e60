from __future__ import annotations

import json

import pytest

from scoring.formats import parse
from scoring.rewards.result import Reward
from scoring.scorer import Scored, ScoringInputError
from webapp.api import services
from webapp.api.models import ScoreJob

pytestmark = pytest.mark.django_db

RESPONSE = "<think>easy</think><answer>Paris</answer>"


def fake_score(method, text, golds, *, params=None, judgements=None):
    """Stands in for scoring.scorer.score: 1 for a right answer, plus the caller's 'bonus' parameter."""
    if method == "tiresrag" and not judgements:
        raise ScoringInputError("judgements.sufficiency", "is required")
    if (params or {}).get("bonus", 0) > 1:
        raise ScoringInputError("params.bonus", "must lie in [0, 1]")
    total = (1.0 if "Paris" in golds and "Paris" in text else 0.0) + (params or {}).get("bonus", 0.0)
    return Scored(
        parse(method, text), Reward(total=total, components={"outcome": total}, step_rewards=(0.5,))
    )


def fake_params_check(method, params):
    """Stands in for scoring.scorer.method_params: fake_score's one parameter, 'bonus', in [0, 1]."""
    if (params or {}).get("bonus", 0) > 1:
        raise ScoringInputError("params.bonus", "must lie in [0, 1]")


@pytest.fixture
def scorer(monkeypatch):
    monkeypatch.setattr(services, "scorer_function", lambda: fake_score)
    monkeypatch.setattr(services, "params_checker", lambda: fake_params_check)


def _body(n=1, method="search_r1", **extra):
    item = {"response": RESPONSE, "golden_answers": ["Paris"], **extra}
    return {"method": method, "params": {"bonus": 0.5}, "trajectories": [item] * n}


def test_it_answers_501_when_the_scorer_is_missing(api_client, monkeypatch):
    def unavailable():
        raise services.ScoringUnavailable("scoring.scorer is not available yet")

    monkeypatch.setattr(services, "scorer_function", unavailable)
    response = api_client.post("/api/v1/score", _body(), format="json")
    assert response.status_code == 501
    assert response.json() == {"detail": "scoring.scorer is not available yet"}


def test_it_scores_a_small_batch_in_the_request(api_client, scorer):
    response = api_client.post("/api/v1/score", _body(2), format="json")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["total"] for r in results] == [1.5, 1.5]
    assert results[0]["components"] == {"outcome": 1.5}
    assert results[0]["step_rewards"] == [0.5]
    assert results[0]["parsed"]["answer"] == "Paris"


def test_it_reports_a_trajectory_the_scorer_rejects_without_failing_the_batch(api_client, scorer):
    body = _body(method="tiresrag")
    body["trajectories"] = [
        *body["trajectories"],
        {**body["trajectories"][0], "judgements": {"sufficiency": 1}},
    ]
    response = api_client.post("/api/v1/score", body, format="json")
    assert response.status_code == 200
    first, second = response.json()["results"]
    assert first["error"] == {"item": 0, "field": "judgements.sufficiency", "message": "is required"}
    assert second["total"] == 1.5


@pytest.mark.parametrize("n", [1, 3])  # in the request, and before a job is queued
def test_it_refuses_invalid_shared_params_naming_the_field(api_client, scorer, settings, n):
    settings.SCORE_SYNC_MAX = 2
    body = _body(n)
    body["params"] = {"bonus": 5}
    response = api_client.post("/api/v1/score", body, format="json")
    assert response.status_code == 400
    assert response.json() == {"params.bonus": ["must lie in [0, 1]"]}
    assert not ScoreJob.objects.exists()


def test_it_scores_with_the_real_scorer(api_client):
    body = {
        "method": "search_r1",
        "trajectories": [
            {"response": "<think>easy</think><answer>Paris</answer>", "golden_answers": ["Paris"]},
            {"response": "<think>easy</think><answer>Lyon</answer>", "golden_answers": ["Paris"]},
        ],
    }
    response = api_client.post("/api/v1/score", body, format="json")
    assert response.status_code == 200, response.content
    first, second = response.json()["results"]
    assert (first["total"], first["parsed"]["answer"], first["parsed"]["format_ok"]) == (1.0, "Paris", True)
    assert first["components"]["outcome"] == 1.0
    assert second["components"]["outcome"] == 0.0


def test_it_names_the_missing_judgement_of_a_step(api_client):
    response_text = (
        "<think><step><reasoning>a</reasoning><conclusion>b</conclusion></step></think><answer>Paris</answer>"
    )
    body = {"method": "hiprag", "trajectories": [{"response": response_text, "golden_answers": ["Paris"]}]}
    result = api_client.post("/api/v1/score", body, format="json").json()["results"][0]
    assert "under-search" in result["error"]["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"method": "react", "trajectories": [{"response": "x", "golden_answers": ["a"]}]}, "method"),
        ({"method": "hiprag", "trajectories": []}, "trajectories"),
        ({"method": "hiprag", "trajectories": [{"response": "x"}]}, "trajectories"),
        (
            {
                "method": "hiprag",
                "trajectories": [{"response": "x", "golden_answers": ["a"], "format": "xml"}],
            },
            "trajectories",
        ),
        (  # each method scores responses in its own format
            {
                "method": "hiprag",
                "trajectories": [{"response": "x", "golden_answers": ["a"], "format": "search_r1"}],
            },
            "trajectories",
        ),
        (  # judgements are an object of named outcomes
            {
                "method": "hiprag",
                "trajectories": [{"response": "x", "golden_answers": ["a"], "judgements": [1]}],
            },
            "trajectories",
        ),
    ],
)
def test_it_validates_the_request(api_client, scorer, body, field):
    response = api_client.post("/api/v1/score", body, format="json")
    assert response.status_code == 400
    assert field in response.json()


def test_it_turns_a_large_batch_into_a_job_to_poll(
    api_client, scorer, settings, django_capture_on_commit_callbacks
):
    settings.SCORE_SYNC_MAX = 2
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api_client.post("/api/v1/score", _body(3), format="json")
    assert response.status_code == 202
    job = ScoreJob.objects.get()
    assert response.json()["url"].endswith(f"/api/v1/score/jobs/{job.pk}/")
    assert response["Location"] == response.json()["url"]
    assert len(callbacks) == 1  # the task is enqueued only once the job row is committed
    assert api_client.get(response["Location"]).json()["status"] == "pending"

    services.score_job_run(job_id=job.pk)  # what the worker's task does
    body = api_client.get(response["Location"]).json()
    assert body["status"] == "finished"
    assert [r["total"] for r in body["results"]] == [1.5, 1.5, 1.5]


def test_it_serves_the_schema_and_docs_without_a_cdn(api_client, researcher_client):
    schema = api_client.get("/api/v1/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/score" in schema.content
    assert b"/api/v1/runs/{run_id}/step-rewards/" in schema.content
    for page in ("/api/v1/docs/", "/api/v1/redoc/"):
        html = researcher_client.get(page).content.decode()
        assert "/static/drf_spectacular_sidecar/" in html
        assert "cdn" not in html.lower()


SEARCH_STEP = (
    "<step><reasoning>r</reasoning><search>capital of France</search>"
    "<context>Doc 1(Title: France) Paris</context><conclusion>Paris</conclusion></step>"
)
NON_SEARCH_STEP = "<step><reasoning>I know it</reasoning><conclusion>Paris</conclusion></step>"


def _hiprag(*steps):
    return f"<think>{''.join(steps)}</think><answer>Paris</answer>"


@pytest.mark.parametrize("sync_max", [10, 2])  # in the request, and as a job
def test_a_request_is_a_batch_for_hiprags_sec_5_3_average_bonus(api_client, settings, sync_max):
    settings.SCORE_SYNC_MAX = sync_max
    body = {
        "method": "hiprag",
        "params": {"process": "under_only"},
        "trajectories": [
            # under_only: the non-search steps only; 1 + 0.4·1/2 and 1 + 0.4·1/1
            {
                "response": _hiprag(SEARCH_STEP, NON_SEARCH_STEP, NON_SEARCH_STEP),
                "golden_answers": ["Paris"],
                "judgements": {"step_flags": [True, False, True]},
            },
            {
                "response": _hiprag(SEARCH_STEP, NON_SEARCH_STEP),
                "golden_answers": ["Paris"],
                "judgements": {"step_flags": [True, False]},
            },
            # correct, no non-search step: the batch's average bonus (0.2 + 0.4) / 2 (used to be an error)
            {
                "response": _hiprag(SEARCH_STEP),
                "golden_answers": ["Paris"],
                "judgements": {"step_flags": [True]},
            },
        ],
    }
    response = api_client.post("/api/v1/score", body, format="json")
    if sync_max == 2:
        assert response.status_code == 202
        services.score_job_run(job_id=ScoreJob.objects.get().pk)
        results = api_client.get(response["Location"]).json()["results"]
    else:
        assert response.status_code == 200, response.content
        results = response.json()["results"]
    assert [r["total"] for r in results] == pytest.approx([1.2, 1.4, 1.3])


def test_a_verdict_count_that_does_not_match_the_steps_is_reported_with_its_field(api_client):
    body = {
        "method": "hiprag",
        "trajectories": [
            {
                "response": _hiprag(SEARCH_STEP),
                "golden_answers": ["Paris"],
                "judgements": {"step_flags": [1, 0]},
            },
            {
                "response": _hiprag(SEARCH_STEP),
                "golden_answers": ["Paris"],
                "judgements": {"step_flags": [False, False]},
            },
            {"response": "no steps", "golden_answers": ["Paris"], "judgements": {"step_flags": [False]}},
        ],
    }
    response = api_client.post("/api/v1/score", body, format="json")
    assert response.status_code == 200, response.content
    first, second, third = response.json()["results"]
    assert first["error"]["field"] == "judgements.step_flags[0]"  # 1 is not a verdict
    assert second["error"] == {
        "item": 1,
        "field": "judgements.step_flags",
        "message": "2 verdicts for 1 steps",
    }
    assert third["error"] == {
        "item": 2,
        "field": "judgements.step_flags",
        "message": "1 verdicts for 0 steps",
    }


def _real_job_body(n: int) -> dict:
    item = {"response": "<think>t</think><answer>Paris</answer>", "golden_answers": ["Paris"]}
    judged = {"sufficiency": True, "thinking": 0.5}
    trajectories = [{**item, "judgements": judged} for _ in range(n)]
    return {"method": "tiresrag", "params": {"step": 10, "total_steps": 100}, "trajectories": trajectories}


def test_a_job_with_one_bad_item_scores_the_rest_and_names_the_item_and_field(
    api_client, settings, django_capture_on_commit_callbacks
):
    settings.SCORE_SYNC_MAX = 32
    body = _real_job_body(40)
    body["trajectories"][17] = {
        **body["trajectories"][17],
        "judgements": {"sufficiency": True, "thinking": 10**400},
    }
    with django_capture_on_commit_callbacks(execute=False):
        response = api_client.post("/api/v1/score", body, format="json")
    assert response.status_code == 202, response.content
    job = services.score_job_run(job_id=ScoreJob.objects.get().pk)
    assert job.status == ScoreJob.Status.FINISHED
    errors = [r["error"] for r in job.results if "error" in r]
    assert len(job.results) - len(errors) == 39
    assert errors == [
        {
            "item": 17,
            "field": "judgements.thinking",
            "message": "must lie in [0.0, 1.0], got an integer of about 401 digits",
        }
    ]


def test_the_huge_integer_repro_is_a_400_naming_the_parameter(api_client):
    body = {
        "method": "search_r1",
        "params": {"structure_format_score": 10**400},
        "trajectories": [{"response": "<answer>a</answer>", "golden_answers": ["a"]}],
    }
    response = api_client.post("/api/v1/score", body, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "params.structure_format_score": ["must lie in [0.0, 1.0], got an integer of about 401 digits"]
    }


def test_an_untyped_exception_is_that_items_error_only(api_client, monkeypatch, settings):
    def buggy_score(method, text, golds, *, params=None, judgements=None):
        if "Lyon" in text:
            raise OverflowError("int too large to convert to float")
        return fake_score(method, text, golds, params=params, judgements=judgements)

    monkeypatch.setattr(services, "scorer_function", lambda: buggy_score)
    body = _body(3)
    body["trajectories"][1] = {**body["trajectories"][1], "response": "<answer>Lyon</answer>"}
    response = api_client.post("/api/v1/score", body, format="json")
    assert response.status_code == 200
    first, second, third = response.json()["results"]
    assert (first["total"], third["total"]) == (1.5, 1.5)
    assert second["error"]["item"] == 1
    assert "OverflowError" in second["error"]["message"]


def test_a_job_stores_a_non_finite_number_as_valid_json_and_refuses_that_item(
    api_client, settings, django_capture_on_commit_callbacks
):
    settings.SCORE_SYNC_MAX = 1
    body = _real_job_body(3)
    body["trajectories"][1]["judgements"] = {"sufficiency": True, "thinking": float("inf")}
    with django_capture_on_commit_callbacks(execute=False):
        text = json.dumps(body).replace("Infinity", "1e999")  # a number literal json.loads reads as inf
        response = api_client.generic("POST", "/api/v1/score", text, content_type="application/json")
    assert response.status_code == 202, response.content
    job = ScoreJob.objects.get()
    assert job.trajectories[1]["judgements"]["thinking"] == "Infinity"
    job = services.score_job_run(job_id=job.pk)
    assert [("error" in r) for r in job.results] == [False, True, False]
    assert job.results[1]["error"]["field"] == "judgements.thinking"
