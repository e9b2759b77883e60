"""``POST /retrieve`` with Search-R1's exact request and reply, served by the web app.

Two URLs: ``/retrieve`` (the index named by settings.RETRIEVE_INDEX, else the most recently built ready one) and
``/corpora/indexes/<id>/retrieve`` (pinned: a training run should use this, so a new build never changes the
retriever under it). The standalone ``python -m retrieval.server`` answers the same JSON from the same function
(:func:`retrieval.api.handle_retrieve`: Search-R1's lax request reading, any batch size, 422 for a bad request).

Access. Search-R1's, HiPRAG's and AutoSearch's training scripts POST with ``requests.post(url, json=...)`` and no
credentials, so session login cannot apply; and a search costs real CPU, so the endpoint must not be open to
whoever reaches the web server. Hence:

* ``RETRIEVE_TOKEN`` set: every request needs ``Authorization: Bearer <token>`` (compared in constant time);
  scripts add it as one header (docs/retrieval.md).
* unset: only *direct loopback* connections are answered — REMOTE_ADDR is 127.0.0.0/8 or ::1 and no proxy header
  is present (a reverse proxy on the same host would otherwise make every client look local) — and only with
  ``Content-Type: application/json``, which a web page cannot send cross-origin without a CORS preflight we never
  grant (the endpoint is CSRF-exempt, so this is what keeps a malicious page in a local browser out).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from retrieval.api import error_reply, handle_retrieve, retrieve_status
from retrieval.encoders import EncoderError
from retrieval.index import RetrievalIndexError
from webapp.corpora.models import Index
from webapp.corpora.searchers import IndexNotReady, index_searcher
from webapp.corpora.selectors import index_get, index_served_at_retrieve

logger = logging.getLogger(__name__)
INDEX_HEADER = (
    "X-Searchlab-Index"  # which index answered: Search-R1's clients ignore it, people debugging don't
)
_PROXY_HEADERS = ("X-Forwarded-For", "X-Real-IP", "Forwarded")


def _reply(body: dict[str, Any], status: int, **headers: str) -> JsonResponse:
    # ensure_ascii off: the same bytes as the standalone server (and Search-R1's FastAPI one) send.
    response = JsonResponse(body, status=status, json_dumps_params={"ensure_ascii": False})
    for name, value in headers.items():
        response[name] = value
    return response


def _is_direct_loopback(request: HttpRequest) -> bool:
    if any(request.headers.get(name) for name in _PROXY_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def retrieve_refusal(request: HttpRequest) -> JsonResponse | None:
    """Why this request may not search (a reply to send), or None when it may."""
    token: str = settings.RETRIEVE_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return None
        return _reply(
            error_reply("send the shared token as 'Authorization: Bearer <RETRIEVE_TOKEN>'", status=401),
            401,
            **{"WWW-Authenticate": 'Bearer realm="retrieve"'},
        )
    if not _is_direct_loopback(request):
        return _reply(
            error_reply(
                "POST /retrieve is open to local connections only; set RETRIEVE_TOKEN on the server and send "
                "'Authorization: Bearer <token>' to use it from elsewhere",
                status=403,
            ),
            403,
        )
    if request.content_type != "application/json":
        return _reply(
            error_reply(
                f"send the body with 'Content-Type: application/json' (got {request.content_type!r})",
                status=415,
            ),
            415,
        )
    return None


def _answer(request: HttpRequest, index: Index | None, missing: str, missing_status: int) -> JsonResponse:
    if request.method != "POST":
        return _reply(error_reply("use POST with a JSON body", status=405), 405, Allow="POST")
    refusal = retrieve_refusal(request)
    if refusal is not None:
        return refusal
    try:
        payload = json.loads(request.body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:  # FastAPI (Search-R1's server): 422
        return _reply(error_reply(f"the body is not JSON: {error}"), 422)
    if index is None:
        return _reply(error_reply(missing, status=missing_status), missing_status)
    try:
        searcher = index_searcher(index)
    except (IndexNotReady, RetrievalIndexError, EncoderError) as error:
        return _reply(error_reply(str(error), status=503), 503, **{INDEX_HEADER: str(index.pk)})
    try:
        reply = handle_retrieve(searcher, payload)
    except Exception as error:
        logger.exception("retrieval on index %s failed", index.pk)
        reply = error_reply(f"retrieval failed: {error}", status=500)
    return _reply(reply, retrieve_status(reply), **{INDEX_HEADER: str(index.pk)})


@csrf_exempt
@login_not_required
def default_retrieve(request: HttpRequest) -> JsonResponse:
    missing = (
        f"RETRIEVE_INDEX={settings.RETRIEVE_INDEX} is not a ready index"
        if settings.RETRIEVE_INDEX
        else "no ready index to serve: build one on /corpora/"
    )
    return _answer(request, index_served_at_retrieve(), missing, 503)


@csrf_exempt
@login_not_required
def index_retrieve(request: HttpRequest, index_id: int) -> JsonResponse:
    return _answer(request, index_get(index_id=index_id), f"no index {index_id}", 404)
