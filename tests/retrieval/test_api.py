from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from retrieval.api import SEARCH_CHUNK, handle_retrieve, retrieve_status
from scoring.observations import RetrievedDocument


class Recording:
    """Two fixed documents per query; remembers what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], int]] = []

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        self.calls.append((list(queries), topk))
        docs = [
            RetrievedDocument("17", '"Paris"\nCapital of France.', 0.875),
            RetrievedDocument("3", "Lyon\n", 0.5),
        ]
        return [docs[:topk] for _ in queries]


def test_it_answers_with_search_r1_scores_exactly() -> None:
    searcher = Recording()
    reply = handle_retrieve(
        searcher, {"queries": ["capital of france", "lyon"], "topk": 2, "return_scores": True}
    )
    hit = {"document": {"id": "17", "contents": '"Paris"\nCapital of France.'}, "score": 0.875}
    second = {"document": {"id": "3", "contents": "Lyon\n"}, "score": 0.5}
    assert reply == {"result": [[hit, second], [hit, second]]}
    assert retrieve_status(reply) == 200
    assert searcher.calls == [(["capital of france", "lyon"], 2)]  # one call for the whole batch
    assert json.loads(json.dumps(reply)) == reply


@pytest.mark.parametrize(
    ("payload", "expected_topk"),
    [
        # return_scores defaults to false: bare documents.
        ({"queries": ["q"], "topk": 1}, 1),
        # A null topk is the server's default, 3 as in Search-R1.
        ({"queries": ["q"], "topk": None, "return_scores": False}, 3),
        # A missing topk too; unknown fields are ignored like pydantic does.
        ({"queries": ["q"], "extra": 1}, 3),
    ],
)
def test_it_answers_bare_documents_without_scores(payload: dict[str, Any], expected_topk: int) -> None:
    searcher = Recording()
    reply = handle_retrieve(searcher, payload)
    assert searcher.calls == [(["q"], expected_topk)]
    assert reply["result"][0][0] == {"id": "17", "contents": '"Paris"\nCapital of France.'}


def test_it_uses_the_servers_default_topk() -> None:
    searcher = Recording()
    handle_retrieve(searcher, {"queries": ["q"], "topk": None}, default_topk=5)
    assert searcher.calls == [(["q"], 5)]


def test_it_answers_no_queries_without_searching() -> None:
    searcher = Recording()
    assert handle_retrieve(searcher, {"queries": []}) == {"result": []}
    assert searcher.calls == []


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        # The body is not an object.
        (["q"], None),
        # queries missing.
        ({"topk": 3}, "queries"),
        # queries is one string, not a list (a common client mistake).
        ({"queries": "who is paris"}, "queries"),
        # A non-string query.
        ({"queries": ["ok", 3]}, "queries"),
        # topk must not be negative (0 is the default, as in Search-R1's server).
        ({"queries": ["q"], "topk": -1}, "topk"),
        # A fractional topk (pydantic: int_from_float).
        ({"queries": ["q"], "topk": 2.5}, "topk"),
        # A string that is not an integer.
        ({"queries": ["q"], "topk": "three"}, "topk"),
        # An absurd topk.
        ({"queries": ["q"], "topk": 10**6}, "topk"),
        # return_scores must be a boolean (or one of pydantic's spellings of one).
        ({"queries": ["q"], "return_scores": "maybe"}, "return_scores"),
        ({"queries": ["q"], "return_scores": None}, "return_scores"),
        # A lone surrogate is not text.
        ({"queries": ["ok", "a\ud800b"]}, "queries"),
    ],
)
def test_it_names_the_bad_field(payload: Any, field: str | None) -> None:
    searcher = Recording()
    reply = handle_retrieve(searcher, payload)
    assert reply["status"] == 422 == retrieve_status(reply)
    assert reply["field"] == field
    assert (field or "JSON object") in reply["error"]
    assert searcher.calls == []


def test_it_imports_no_model_library_until_one_is_used() -> None:
    """agent/ imports retrieval's client and protocols; torch, FAISS and bm25s load only with an index."""
    import subprocess
    import sys

    code = (
        "import sys, retrieval.client, retrieval.api, retrieval.server, retrieval.index, retrieval.hybrid\n"
        "print(sorted(m for m in ('torch', 'faiss', 'bm25s', 'sentence_transformers', 'django') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    ("payload", "topk", "return_scores"),
    [
        # what pydantic's QueryRequest coerces in Search-R1's server, then `if not request.topk: --topk`
        ({"queries": ["q"], "topk": "3"}, 3, False),
        ({"queries": ["q"], "topk": " 4 "}, 4, False),
        ({"queries": ["q"], "topk": "2.0"}, 2, False),
        ({"queries": ["q"], "topk": 2.0}, 2, False),
        ({"queries": ["q"], "topk": True}, 1, False),
        ({"queries": ["q"], "topk": 0}, 5, False),
        ({"queries": ["q"], "topk": "0"}, 5, False),
        ({"queries": ["q"], "topk": False}, 5, False),
        ({"queries": ["q"], "return_scores": "true"}, 5, True),
        ({"queries": ["q"], "return_scores": "No"}, 5, False),
        ({"queries": ["q"], "return_scores": 1}, 5, True),
    ],
)
def test_it_reads_a_request_as_search_r1s_server_does(payload: Any, topk: int, return_scores: bool) -> None:
    searcher = Recording()
    reply = handle_retrieve(searcher, payload, default_topk=5)
    assert searcher.calls == [(["q"], topk)]
    assert retrieve_status(reply) == 200
    assert ("score" in reply["result"][0][0]) is return_scores


def test_it_answers_a_batch_of_any_size_chunk_by_chunk() -> None:
    searcher = Recording()
    queries = [f"q{i}" for i in range(2 * SEARCH_CHUNK + 3)]
    reply = handle_retrieve(searcher, {"queries": queries, "topk": 1})
    assert [len(call[0]) for call in searcher.calls] == [SEARCH_CHUNK, SEARCH_CHUNK, 3]
    assert [q for call in searcher.calls for q in call[0]] == queries
    assert len(reply["result"]) == len(queries)
