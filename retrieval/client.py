"""A :class:`~retrieval.searcher.Searcher` over HTTP: any Search-R1-compatible ``POST /retrieve`` server (ours,
Search-R1's own FastAPI one, or the web app's)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from scoring.observations import RETRIEVE_PATH, RetrievalRequest, RetrievedDocument, parse_retrieval_response


class RemoteRetrievalError(RuntimeError):
    """The server could not be reached, or refused the request; the message names the URL."""


def retrieve_url(base_url: str) -> str:
    """``http://host:8000`` and ``http://host:8000/retrieve`` both mean the endpoint.

    >>> retrieve_url("http://127.0.0.1:8000/")
    'http://127.0.0.1:8000/retrieve'
    """
    base = base_url.rstrip("/")
    return base if base.endswith(RETRIEVE_PATH) else base + RETRIEVE_PATH


class RemoteSearcher:
    """POSTs each batch of queries as one request, asking for scores.

    Connection failures, timeouts and 5xx replies are retried ``retries`` times with exponential backoff
    (``backoff``, twice that, ...); a 4xx reply is the caller's mistake and is raised at once with the server's
    message.
    """

    def __init__(
        self,
        base_url: str,
        timeout: float = 30.0,
        retries: int = 3,
        *,
        backoff: float = 0.5,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.url = retrieve_url(base_url)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.headers = {"Content-Type": "application/json", **(headers or {})}

    def _post(self, body: bytes) -> Any:
        request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return json.loads(response.read())

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        if not queries:
            return []
        body = json.dumps(RetrievalRequest(tuple(queries), topk, return_scores=True).to_json()).encode()
        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                reply = self._post(body)
            except urllib.error.HTTPError as error:
                detail = error.read().decode(errors="replace")[:500]
                if error.code < 500:
                    raise RemoteRetrievalError(
                        f"POST {self.url} was refused: HTTP {error.code}: {detail}"
                    ) from None
                last = f"HTTP {error.code}: {detail}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                last = str(getattr(error, "reason", error))
            else:
                try:
                    results = parse_retrieval_response(reply)
                except (KeyError, TypeError, AttributeError) as error:
                    raise RemoteRetrievalError(
                        f"POST {self.url} answered something that is not a /retrieve reply ({error!r})"
                    ) from None
                if len(results) != len(queries):
                    raise RemoteRetrievalError(
                        f"POST {self.url} answered {len(results)} result lists for {len(queries)} queries"
                    )
                return results
        raise RemoteRetrievalError(f"POST {self.url} failed after {self.retries + 1} attempts: {last}")
