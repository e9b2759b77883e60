"""Fixtures of the agent tests: a local OpenAI-compatible HTTP server with scripted replies, a keyword searcher over
a few passages, and a scripted policy backend. No model hub, no network beyond 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent.backends import Generation, chatml, cut_at_stop
from retrieval.searcher import RetrievedDocument


@dataclass
class Reply:
    """One scripted answer: ``text`` as the completion, or an HTTP ``status`` error, or a ``garbage`` body; after
    ``delay`` seconds (longer than the client's timeout = an injected timeout)."""

    text: str = ""
    status: int = 200
    delay: float = 0.0
    garbage: bool = False
    headers: dict[str, str] = field(default_factory=dict)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the listen backlog (default 5 drops concurrent connects)


class ScriptedServer:
    """``/v1/chat/completions`` and ``/v1/completions`` answering from a queue of :class:`Reply`, then from
    ``responder(request body) -> text`` (default: ``<answer>True</answer>``)."""

    def __init__(self) -> None:
        self.queue: deque[Reply] = deque()
        self.responder: Callable[[dict[str, Any]], str | Reply] = lambda body: "<answer>True</answer>"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = 0.0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body in two writes must not wait for a delayed ACK

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    scripted = server.queue.popleft() if server.queue else None
                try:
                    reply = scripted if scripted is not None else server.responder(body)
                    if isinstance(reply, str):
                        reply = Reply(reply, delay=server.delay)
                    if reply.delay:
                        time.sleep(reply.delay)
                    self._send(reply, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, reply: Reply, body: dict[str, Any]) -> None:
                if reply.garbage:
                    payload = b"<html>502 gateway hiccup"
                    content_type = "application/json"
                elif reply.status != 200:
                    payload = json.dumps(
                        {"error": {"message": f"scripted {reply.status}", "type": "x"}}
                    ).encode()
                    content_type = "application/json"
                else:
                    usage = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
                    if self.path.endswith("/chat/completions"):
                        choice: dict[str, Any] = {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.text},
                            "finish_reason": "stop",
                        }
                        obj = "chat.completion"
                    else:
                        choice = {"index": 0, "text": reply.text, "finish_reason": "stop", "logprobs": None}
                        obj = "text_completion"
                    payload = json.dumps(
                        {
                            "id": "x",
                            "object": obj,
                            "created": 0,
                            "model": body.get("model", "m"),
                            "choices": [choice],
                            "usage": usage,
                        }
                    ).encode()
                    content_type = "application/json"
                self.send_response(reply.status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def script(self, *replies: Reply | str) -> None:
        for reply in replies:
            self.queue.append(Reply(reply) if isinstance(reply, str) else reply)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.close()


class KeywordSearcher:
    """Top-k passages by the number of query words they contain (ties: corpus order)."""

    def __init__(self, passages: Sequence[tuple[str, str]]) -> None:
        self.passages = [RetrievedDocument(pid, contents, 0.0) for pid, contents in passages]
        self._words = [set(_words(d.contents)) for d in self.passages]
        self.calls: list[list[str]] = []

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        self.calls.append(list(queries))
        results = []
        for query in queries:
            words = set(_words(query))
            ranked = sorted(range(len(self.passages)), key=lambda i: (-len(words & self._words[i]), i))[:topk]
            results.append(
                [
                    RetrievedDocument(
                        self.passages[i].id, self.passages[i].contents, float(len(words & self._words[i]))
                    )
                    for i in ranked
                ]
            )
        return results


def _words(text: str) -> list[str]:
    return ["".join(ch for ch in w.lower() if ch.isalnum()) for w in text.split() if len(w) > 2]


PASSAGES = [
    ("0", "Paris\nParis is the capital and largest city of France."),
    ("1", "Eiffel Tower\nThe Eiffel Tower is a tower in Paris designed by Gustave Eiffel's company."),
    ("2", "Berlin\nBerlin is the capital of Germany."),
    ("3", "Gustave Eiffel\nGustave Eiffel was a French civil engineer born in Dijon."),
]


@pytest.fixture
def searcher() -> KeywordSearcher:
    return KeywordSearcher(PASSAGES)


class ScriptedBackend:
    """A policy whose reply is ``script(prompt_and_response_so_far) -> str``; the backend cuts it at the first stop
    string, as real backends do, and at ``max_new_tokens`` tokens (a token is a space-separated word here).
    Records every batch it was asked for and the token cap of each."""

    name = "scripted"

    def __init__(self, script: Callable[[str], str]) -> None:
        self.script = script
        self.batches: list[list[str]] = []
        self.caps: list[int] = []

    def generate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]:
        self.batches.append(list(prompts))
        self.caps.append(max_new_tokens)
        out = []
        for prompt in prompts:
            text, reason = cut_at_stop(self.script(prompt), stop)
            words = text.split(" ")
            finish = "stop" if reason else "eos"
            if len(words) > max_new_tokens:
                text, reason, finish = " ".join(words[:max_new_tokens]), None, "length"
            out.append(
                Generation(text, finish, reason, prompt_tokens=5, completion_tokens=len(text.split(" ")))
            )
        return out

    def count_tokens(self, text: str) -> int:
        return len(text.split(" "))

    def apply_chat_template(self, messages: Sequence[dict[str, str]]) -> str:
        return chatml(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split(" ")[:max_tokens])
