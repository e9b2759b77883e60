"""``POST /retrieve`` as a pure function, shared by the standalone server and the web app's view.

Request and reply are Search-R1's (``search_r1/search/retrieval_server.py``), built from the schema in
:mod:`scoring.observations`::

    {"queries": ["..."], "topk": 3, "return_scores": true}
    -> {"result": [[{"document": {"id": "...", "contents": "Title\\ntext"}, "score": 0.83}, ...], ...]}

A request is read as Search-R1's FastAPI server reads it (pydantic's ``QueryRequest`` in lax mode, then
``if not request.topk: request.topk = config.retrieval_topk``): ``topk`` may be a number sent as a string (``"3"``),
an integral float (``3.0``) or a boolean, and ``0`` or null means the server's default; ``return_scores`` takes
pydantic's boolean spellings (``"true"``, ``1``, ``"yes"``, ...). Any number of queries is answered, searched
:data:`SEARCH_CHUNK` at a time. A request that still cannot be read gets ``{"error": message, "field": name,
"status": 422}`` instead — 422, as FastAPI answers a request that fails validation; :func:`retrieve_status` is the HTTP
status to send with a reply.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from retrieval.index import METADATA_FILE, IndexSearcher, load_index
from retrieval.searcher import Searcher
from scoring.observations import (
    QUERIES_FIELD,
    RETRIEVE_DEFAULT_TOPK,
    RETURN_SCORES_FIELD,
    TOPK_FIELD,
    RetrievalRequest,
    retrieval_response,
)

SEARCH_CHUNK = 4096  # queries encoded and searched per call: a request of any size, in bounded steps
MAX_TOPK = 1000
INVALID_REQUEST = 422  # FastAPI's status for a body that fails validation (Search-R1's server is FastAPI)
ERROR_FIELD = "error"
STATUS_FIELD = "status"
_FIELD_IN_MESSAGE = re.compile(r"^'(\w+)'")
# pydantic v2's lax bool: these strings (case-insensitive, stripped), 0/1 and 0.0/1.0
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_INTEGRAL = re.compile(r"^[+-]?\d+(?:\.0*)?$")


def error_reply(message: str, *, field: str | None = None, status: int = INVALID_REQUEST) -> dict[str, Any]:
    return {ERROR_FIELD: message, "field": field, STATUS_FIELD: status}


def _lax_topk(value: Any) -> Any:
    """``Optional[int]`` as pydantic v2 coerces it from JSON: a bool, an integral float, or a string holding an
    integer (``" 3 "``, ``"3.0"``) becomes an int; anything else is left for :class:`RetrievalRequest` to refuse."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, str) and _INTEGRAL.match(value.strip()):
        return int(value.strip().split(".")[0])
    return value


def _lax_bool(value: Any) -> Any:
    """``bool`` as pydantic v2 coerces it from JSON (0/1, 0.0/1.0 and its true/false strings)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return value


def read_request(payload: dict[str, Any], default_topk: int) -> RetrievalRequest:
    """The request as Search-R1's server reads it (module docstring); a ``ValueError`` names the bad field."""
    lax = dict(payload)
    if lax.get(TOPK_FIELD) is not None:
        lax[TOPK_FIELD] = _lax_topk(lax[TOPK_FIELD])
        if lax[TOPK_FIELD] == 0:  # `if not request.topk:` -> the server's --topk
            lax[TOPK_FIELD] = None
        elif isinstance(lax[TOPK_FIELD], int) and lax[TOPK_FIELD] < 0:
            raise ValueError(
                f"'{TOPK_FIELD}' is {lax[TOPK_FIELD]}: a positive integer, 0 or null (the default)"
            )
    if RETURN_SCORES_FIELD in lax:
        lax[RETURN_SCORES_FIELD] = _lax_bool(lax[RETURN_SCORES_FIELD])
    request = RetrievalRequest.from_json(lax)
    for i, query in enumerate(request.queries):
        try:
            query.encode("utf-8")
        except UnicodeEncodeError as error:
            bad = query[error.start : error.end].encode("unicode_escape").decode()
            raise ValueError(
                f"'{QUERIES_FIELD}'[{i}] holds a lone surrogate ({bad}) at character {error.start}: not Unicode text "
                "(send a character outside the BMP as its UTF-8 bytes or as a \\ud83d\\ude00-style pair)"
            ) from None
    if request.topk is None:
        request = RetrievalRequest(request.queries, default_topk, request.return_scores)
    return request


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
        request = read_request(payload, default_topk)
    except ValueError as error:
        match = _FIELD_IN_MESSAGE.match(str(error))
        return error_reply(str(error), field=match.group(1) if match else None)
    topk = request.effective_topk
    if topk > MAX_TOPK:
        return error_reply(f"'topk' is {topk}; at most {MAX_TOPK}", field="topk")
    queries = list(request.queries)
    results = []
    for start in range(0, len(queries), SEARCH_CHUNK):
        results.extend(searcher.search(queries[start : start + SEARCH_CHUNK], topk))
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
