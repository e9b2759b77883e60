"""A scripted OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1 for the judge benchmarks.

A bench gives it a policy: ``reply(content, n)`` gets the last message's text and the request's number (1, 2, …)
and returns the reply text, or an ``(HTTP status, error message)`` pair to fail that request. The server counts
requests, failures and tokens (about four characters a token, the ``usage`` it reports), so a bench can check what
the client recorded against what the server saw.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[str, int], "str | tuple[int, str]"]


def digest(text: str) -> int:
    """A stable number of a prompt, so a scripted judge answers the same prompt the same way every run."""
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def hiprag_reply(content: str, *, fact_false_every: int, equivalent_true_every: int) -> str:
    """HiPRAG's two judges, scripted: the Fact-Checker (under-search) and the equivalence check (over-search)."""
    if "Fact-Checker" in content:
        return (
            "<answer>False</answer>" if digest(content) % fact_false_every == 0 else "<answer>True</answer>"
        )
    if "semantically equivalent" in content:
        return (
            "<answer>True</answer>"
            if digest(content) % equivalent_true_every == 0
            else "<answer>False</answer>"
        )
    return "I am not sure."  # the re-ask of a query without retrieval


class ScriptedChatServer:
    def __init__(self, reply: Reply) -> None:
        self.requests = self.failed = self.tokens_in = self.tokens_out = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                content = str(body["messages"][-1]["content"])
                with server.lock:
                    server.requests += 1
                    number = server.requests
                answer = reply(content, number)
                if isinstance(answer, tuple):
                    status, message = answer
                    with server.lock:
                        server.failed += 1
                    self._send(status, {"error": {"message": message, "type": "scripted_fault"}})
                    return
                usage = {"prompt_tokens": len(content) // 4, "completion_tokens": max(1, len(answer) // 4)}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                with server.lock:
                    server.tokens_in += usage["prompt_tokens"]
                    server.tokens_out += usage["completion_tokens"]
                choice = {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
                head = {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model")}
                self._send(200, {**head, "choices": [choice], "usage": usage})

            def _send(self, status: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
