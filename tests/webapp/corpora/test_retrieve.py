"""POST /retrieve: Search-R1's request and reply, byte-compatible with the standalone server, and who may call it.

Django's test client connects from 127.0.0.1, i.e. as a training script on the same machine.
"""

from __future__ import annotations

import json

import pytest

from retrieval.client import RemoteRetrievalError, RemoteSearcher
from retrieval.index import load_index
from retrieval.server import serve_in_thread
from tests.webapp.corpora.conftest import ready_index

pytestmark = pytest.mark.django_db
QUERY = {"queries": ["Which radio program aired on CBS?", "Who directed the film?"], "topk": 2}


def _post(client, url, body, **extra):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(url, data, content_type=extra.pop("content_type", "application/json"), **extra)


def test_it_answers_with_search_r1_scores(client, dense_index):
    response = _post(client, "/retrieve", {**QUERY, "return_scores": True})

    assert response.status_code == 200
    assert response["X-Searchlab-Index"] == str(dense_index.pk)
    reply = response.json()
    assert list(reply) == ["result"] and len(reply["result"]) == 2
    for hits in reply["result"]:
        assert len(hits) == 2
        for hit in hits:
            assert set(hit) == {"document", "score"} and set(hit["document"]) == {"id", "contents"}
            assert isinstance(hit["score"], float) and isinstance(hit["document"]["id"], str)
        assert hits[0]["score"] >= hits[1]["score"]


def test_it_answers_bare_documents_without_scores(client, dense_index):
    reply = _post(client, "/retrieve", QUERY).json()  # return_scores defaults to false, as in Search-R1

    assert all(set(hit) == {"id", "contents"} for hits in reply["result"] for hit in hits)


def test_it_reads_a_null_topk_as_three(client, dense_index):
    reply = _post(client, "/retrieve", {"queries": ["radio"], "topk": None}).json()

    assert len(reply["result"][0]) == 3


def test_it_replies_exactly_as_the_standalone_server_does(client, dense_index):
    import urllib.request

    server = serve_in_thread(load_index(dense_index.path))
    body = json.dumps({**QUERY, "return_scores": True}).encode()
    try:
        request = urllib.request.Request(f"{server.url}/retrieve", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as standalone:
            expected = standalone.read()
    finally:
        server.shutdown()
        server.server_close()

    assert _post(client, "/retrieve", body).content == expected


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ("{not json", None, "the body is not JSON"),
        ("[1, 2]", None, "must be a JSON object, got list"),
        ({"queries": "one"}, "queries", "'queries' must be a list of strings"),
        ({"queries": ["q"], "topk": -2}, "topk", "'topk' is -2: a positive integer, 0 or null"),
        ({"queries": ["q"], "topk": 5000}, "topk", "at most 1000"),
        ({"queries": ["q"], "return_scores": "maybe"}, "return_scores", "'return_scores' must be a boolean"),
        ({"queries": ["\ud800"]}, "queries", "'queries'[0] holds a lone surrogate (\\ud800)"),
    ],
)
def test_it_refuses_a_bad_request_naming_the_field(client, dense_index, body, field, message):
    response = _post(client, "/retrieve", body)

    assert response.status_code == 422  # as Search-R1's FastAPI server answers
    assert response.json()["field"] == field and message in response.json()["error"]


def test_it_serves_a_pinned_index_and_the_configured_default(client, dense_index, bm25_index, settings):
    assert _post(client, f"/corpora/indexes/{bm25_index.pk}/retrieve", QUERY)["X-Searchlab-Index"] == str(
        bm25_index.pk
    )
    assert _post(client, "/retrieve", QUERY)["X-Searchlab-Index"] == str(
        bm25_index.pk
    )  # the newest ready one
    settings.RETRIEVE_INDEX = dense_index.pk
    assert _post(client, "/retrieve", QUERY)["X-Searchlab-Index"] == str(dense_index.pk)


def test_it_says_when_there_is_nothing_to_serve(client, corpus, settings):
    assert _post(client, "/retrieve", QUERY).status_code == 503
    assert _post(client, "/corpora/indexes/999/retrieve", QUERY).json()["error"] == "no index 999"
    settings.RETRIEVE_INDEX = 999
    assert "RETRIEVE_INDEX=999 is not a ready index" in _post(client, "/retrieve", QUERY).json()["error"]


def test_it_refuses_an_index_that_is_still_building(client, dense_index):
    dense_index.status = "building"
    dense_index.save()

    response = _post(client, f"/corpora/indexes/{dense_index.pk}/retrieve", QUERY)

    assert response.status_code == 503 and "is building, not ready" in response.json()["error"]


def test_it_wants_post(client, dense_index):
    response = client.get("/retrieve")

    assert response.status_code == 405 and response["Allow"] == "POST"


@pytest.mark.parametrize(
    ("extra", "status"),
    [
        ({"REMOTE_ADDR": "10.1.2.3"}, 403),  # another machine, and no token configured
        ({"HTTP_X_FORWARDED_FOR": "203.0.113.9"}, 403),  # through a proxy on this host: not really local
        ({"content_type": "text/plain"}, 415),  # what a cross-origin page could send without a preflight
        ({"REMOTE_ADDR": "::1"}, 200),
    ],
)
def test_it_is_open_to_direct_local_json_requests_only_without_a_token(client, dense_index, extra, status):
    assert _post(client, "/retrieve", QUERY, **extra).status_code == status


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),
        ("Bearer wrong", 401),
        ("Token s3cret", 401),
        ("Bearer s3cret", 200),
        ("bearer s3cret", 200),  # the scheme is case-insensitive (RFC 7235)
    ],
)
def test_it_wants_the_shared_token_when_one_is_set(client, dense_index, settings, authorization, status):
    settings.RETRIEVE_TOKEN = "s3cret"
    extra = {"REMOTE_ADDR": "10.1.2.3"}  # from anywhere, even a plain-text body, once the token matches
    if authorization:
        extra["HTTP_AUTHORIZATION"] = authorization

    response = _post(client, "/retrieve", QUERY, **extra)

    assert response.status_code == status
    if status == 401:
        assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_needs_no_login_or_csrf_token(dense_index):
    from django.test import Client

    response = _post(Client(enforce_csrf_checks=True), "/retrieve", QUERY)

    assert response.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_it_answers_the_remote_searcher_a_training_run_uses(live_server, corpus, index_folders, settings):
    index = ready_index(corpus, index_folders["hnsw"], name="served")
    url = f"{live_server.url}/corpora/indexes/{index.pk}/retrieve"

    results = RemoteSearcher(url).search(["radio program"], 3)

    assert len(results) == 1 and len(results[0]) == 3 and results[0][0].contents
    settings.RETRIEVE_TOKEN = "s3cret"
    with pytest.raises(RemoteRetrievalError, match="HTTP 401"):
        RemoteSearcher(url, retries=0).search(["radio"], 3)
    authorized = RemoteSearcher(url, headers={"Authorization": "Bearer s3cret"})
    assert [d.id for d in authorized.search(["radio program"], 3)[0]] == [d.id for d in results[0]]


def test_it_answers_ten_thousand_queries_in_one_request(client, dense_index):
    # a veRL batch of 820 prompts × 5 rollouts is 4,100 searches a turn; Search-R1's client sends them in one POST
    queries = [f"capital of France {i}" for i in range(10_000)]
    response = _post(client, "/retrieve", {"queries": queries, "topk": "3", "return_scores": "true"})

    assert response.status_code == 200
    result = response.json()["result"]
    assert len(result) == 10_000 and all(len(hits) == 3 for hits in result)
    assert (
        result[0]
        == _post(client, "/retrieve", {"queries": queries[:1], "topk": 3, "return_scores": True}).json()[
            "result"
        ][0]
    )
