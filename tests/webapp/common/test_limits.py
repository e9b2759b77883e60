"""webapp.common.limits: JSON depth and body size on /api/ and /retrieve, answered as JSON, never a 500."""

from __future__ import annotations

import io

import pytest
from rest_framework.exceptions import ParseError

from webapp.common.limits import JSONParser, json_depth_exceeds

pytestmark = pytest.mark.django_db

DEEP = b"[" * 50_000 + b"]" * 50_000


@pytest.mark.parametrize("path", ["/api/v1/score", "/retrieve", "/api/v1/runs/1/ingest/"])
def test_json_nested_50000_deep_is_a_400_naming_the_limit(api_client, path):
    response = api_client.generic("POST", path, DEEP, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["limit"] == "REQUEST_JSON_MAX_DEPTH"
    assert body["max_depth"] == 64
    assert "nested deeper than 64 levels" in body["detail"]


def test_a_body_at_the_depth_limit_goes_through(api_client):
    nested: object = ["a"]
    for _ in range(60):
        nested = [nested]
    body = {"method": "search_r1", "trajectories": [{"response": "x", "golden_answers": ["a"]}]}
    body["params"] = {"reward": nested}  # 63 levels in all: parsed, then refused by the scorer
    response = api_client.post("/api/v1/score", body, format="json")
    assert response.status_code == 400
    assert "params.reward" in response.json()


def test_a_body_over_the_upload_limit_is_a_json_413_on_api_paths(api_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = api_client.generic(
        "POST", "/api/v1/score", b'{"x": "' + b"a" * 5000 + b'"}', content_type="application/json"
    )
    assert response.status_code == 413
    body = response.json()
    assert (body["limit"], body["max_bytes"]) == ("DATA_UPLOAD_MAX_MEMORY_SIZE", 1024)
    assert "5,009 bytes is over the limit of 1,024 bytes" in body["detail"]


def test_the_parser_answers_depth_and_digit_limits_as_parse_errors():
    with pytest.raises(ParseError, match="nested deeper than 64"):
        JSONParser().parse(io.BytesIO(DEEP))
    with pytest.raises(ParseError, match="JSON parse error"):
        JSONParser().parse(io.BytesIO(b'{"n": ' + b"9" * 5000 + b"}"))
    assert JSONParser().parse(io.BytesIO(b'{"n": [1, "[[[["]}')) == {"n": [1, "[[[["]}


def test_brackets_inside_strings_and_escapes_do_not_count():
    assert not json_depth_exceeds(b'{"a": "\\"[[[[[[[[", "b": [1]}', 2)
    assert json_depth_exceeds(b'{"a": "\\\\", "b": [[[1]]]}', 3)
