from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from retrieval.batching import BatchingSearcher
from retrieval.client import RemoteRetrievalError, RemoteSearcher
from retrieval.index import load_index
from retrieval.server import RetrievalServer, serve_in_thread
from scoring.observations import RetrievedDocument


@pytest.fixture
def server(built_indexes: dict[str, Path]) -> Iterator[RetrievalServer]:
    running = serve_in_thread(load_index(built_indexes["hnsw"]), port=0)
    yield running
    running.shutdown()
    running.server_close()


def post(url: str, body: bytes) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_it_serves_search_r1_json_over_http(server: RetrievalServer) -> None:
    body = json.dumps({"queries": ["Meet Corliss Archer radio program"], "topk": None, "return_scores": True})
    status, reply = post(server.url + "/retrieve", body.encode())
    assert status == 200
    [[first, *rest]] = reply["result"]
    assert len(rest) == 2  # topk null -> 3
    assert set(first) == {"document", "score"}
    assert first["document"]["id"] == "0"
    assert first["document"]["contents"].startswith("Meet Corliss Archer\n")


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        # Not JSON (FastAPI, Search-R1's server: 422).
        ("/retrieve", b"{nope", 422),
        # JSON with a bad field.
        ("/retrieve", b'{"queries": ["q"], "topk": -1}', 422),
        # A lone surrogate: a clear 422, not a 500.
        ("/retrieve", b'{"queries": ["\\ud800"]}', 422),
        # Another path.
        ("/search", b'{"queries": ["q"]}', 404),
    ],
)
def test_it_answers_bad_requests_with_an_error(
    server: RetrievalServer, path: str, body: bytes, status: int
) -> None:
    got, reply = post(server.url + path, body)
    assert got == status
    assert reply["status"] == status


def test_it_serves_remote_searchers_from_many_threads(
    server: RetrievalServer, built_indexes: dict[str, Path]
) -> None:
    local = load_index(built_indexes["hnsw"])
    remote = RemoteSearcher(server.url, timeout=10, retries=0)
    queries = [f"radio actress born {1900 + i}" for i in range(32)]
    expected = local.search(queries, 3)
    got: dict[int, list[list[RetrievedDocument]]] = {}

    def client(i: int) -> None:
        got[i] = remote.search(queries[i : i + 1], 3)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(queries))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [got[i][0] for i in range(len(queries))] == [hits for hits in expected]


class Flaky(BaseHTTPRequestHandler):
    """Fails the first ``failures`` POSTs with a 503, then answers one document per query."""

    failures = 2
    seen = 0

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen += 1
        if type(self).seen <= type(self).failures:
            self.send_response(503)
            self.end_headers()
            return
        result = [[{"document": {"id": "1", "contents": "T\nx"}, "score": 0.5}] for _ in payload["queries"]]
        data = json.dumps({"result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[ThreadingHTTPServer]:
    Flaky.seen = 0
    running = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=running.serve_forever, daemon=True).start()
    yield running
    running.shutdown()
    running.server_close()


def test_it_retries_a_failing_server(flaky: ThreadingHTTPServer) -> None:
    url = f"http://127.0.0.1:{flaky.server_address[1]}"
    [[hit]] = RemoteSearcher(url, timeout=5, retries=2, backoff=0.01).search(["q"], 1)
    assert hit == RetrievedDocument("1", "T\nx", 0.5)
    assert Flaky.seen == 3


def test_it_gives_up_naming_the_url(flaky: ThreadingHTTPServer) -> None:
    url = f"http://127.0.0.1:{flaky.server_address[1]}/retrieve"
    with pytest.raises(RemoteRetrievalError, match=rf"POST {url} failed after 2 attempts: HTTP 503"):
        RemoteSearcher(url, timeout=5, retries=1, backoff=0.01).search(["q"], 1)


def test_it_does_not_retry_a_refused_request(server: RetrievalServer) -> None:
    with pytest.raises(RemoteRetrievalError, match=r"was refused: HTTP 422: .*'topk' is 5000"):
        RemoteSearcher(server.url, retries=3).search(["q"], 5000)


def test_it_names_an_unreachable_url() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), Flaky) as closed:
        port = closed.server_address[1]  # bound then closed: nobody listens there
    with pytest.raises(
        RemoteRetrievalError, match=rf"POST http://127.0.0.1:{port}/retrieve failed after 2 attempts"
    ):
        RemoteSearcher(f"http://127.0.0.1:{port}", timeout=2, retries=1, backoff=0.01).search(["q"], 1)


class Counting:
    def __init__(self) -> None:
        self.batches: list[int] = []
        self.entered = 0
        self.release = threading.Event()

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        self.entered += len(queries)
        self.release.wait(5)
        self.batches.append(len(queries))
        if "boom" in queries:
            raise RuntimeError("index exploded")
        return [[RetrievedDocument(q, q, float(k)) for k in range(topk)] for q in queries]


def test_it_batches_concurrent_searches_and_slices_each_topk() -> None:
    inner = Counting()
    batching = BatchingSearcher(inner)
    got: dict[str, list[list[RetrievedDocument]]] = {}

    def call(query: str, topk: int) -> None:
        got[query] = batching.search([query], topk)

    threads = [threading.Thread(target=call, args=(f"q{i}", 1 + i % 3)) for i in range(9)]
    for thread in threads:
        thread.start()
    while (
        inner.entered + batching._jobs.qsize() < 9
    ):  # the first batch is held inside the searcher, the rest queue
        threading.Event().wait(0.01)
    inner.release.set()
    for thread in threads:
        thread.join()
    assert sum(inner.batches) == 9 and len(inner.batches) < 9
    assert all(len(got[f"q{i}"][0]) == 1 + i % 3 for i in range(9))
    with pytest.raises(RuntimeError, match="index exploded"):
        batching.search(["boom"], 1)
    batching.close()
