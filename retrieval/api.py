"""``POST /retrieve`` as a pure function, shared by the standalone server and the web app's view.

Request and reply are Search-R1's (``search_r1/search/retrieval_server.py``), built from the schema in
:mod:`scoring.observations`::

    {"queries": ["..."], "topk": 3, "return_scores": true}
    -> {"result": [[{"document": {"id": "...", "contents": "Title\\ntext"}, "score": 0.83}, ...], ...]}

A bad request gets ``{"error": message, "field": name, "status": 400}`` instead; :func:`retrieve_status` is the HTTP
status to send with a reply.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from retrieval.index import METADATA_FILE, IndexSearcher, load_index
from retrieval.searcher import Searcher
from scoring.observations import RETRIEVE_DEFAULT_TOPK, RetrievalRequest, retrieval_response

MAX_QUERIES = 4096  # one request's batch; beyond this a client should split (bounds memory and latency)
MAX_TOPK = 1000
ERROR_FIELD = "error"
STATUS_FIELD = "status"
_FIELD_IN_MESSAGE = re.compile(r"^'(\w+)'")


def error_reply(message: str, *, field: str | None = None, status: int = 400) -> dict[str, Any]:
    return {ERROR_FIELD: message, "field": field, STATUS_FIELD: status}


def retrieve_status(reply: dict[str, Any]) -> int:
    """The HTTP status of a :func:`handle_retrieve` reply: 200, or the error's own."""
    status = reply.get(STATUS_FIELD, 200) if ERROR_FIELD in reply else 200
    return int(status)


def handle_retrieve(
    searcher: Searcher, payload: Any, *, default_topk: int = RETRIEVE_DEFAULT_TOPK
) -> dict[str, Any]:
    """Validate a decoded request body, search all its queries in one call, and build the reply.

    ``default_topk`` stands for a null or missing ``topk`` (Search-R1's server uses its ``--topk``, default 3).
    """
    if not isinstance(payload, dict):
        return error_reply(f"the request body must be a JSON object, got {type(payload).__name__}")
    try:
        request = RetrievalRequest.from_json(payload)
    except ValueError as error:
        match = _FIELD_IN_MESSAGE.match(str(error))
        return error_reply(str(error), field=match.group(1) if match else None)
    if len(request.queries) > MAX_QUERIES:
        return error_reply(
            f"'queries' holds {len(request.queries)} queries; at most {MAX_QUERIES}", field="queries"
        )
    topk = default_topk if request.topk is None else request.topk
    if topk > MAX_TOPK:
        return error_reply(f"'topk' is {topk}; at most {MAX_TOPK}", field="topk")
    results = searcher.search(list(request.queries), topk) if request.queries else []
    return retrieval_response(results, return_scores=request.return_scores)


_loaded: dict[str, tuple[int, IndexSearcher]] = {}
_loading = threading.Lock()


def searcher_for_index(path: Path | str) -> IndexSearcher:
    """The process-wide searcher of an index folder, loaded once (model, index and all) and reloaded when the
    folder was rebuilt since (its metadata file changed). For a web process answering ``/retrieve``."""
    folder = str(Path(path).resolve())
    stamp = (Path(folder) / METADATA_FILE).stat().st_mtime_ns
    with _loading:
        found = _loaded.get(folder)
        if found is None or found[0] != stamp:
            _loaded[folder] = (stamp, load_index(folder))
        return _loaded[folder][1]
