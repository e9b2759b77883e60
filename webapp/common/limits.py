"""Request limits on the machine-facing paths: body size and JSON nesting depth, answered as JSON.

:class:`RequestLimitsMiddleware` guards the paths in ``settings.REQUEST_LIMIT_PATHS`` (``/api/`` — the REST API and
the training ingest — and ``/retrieve``):

* a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (file uploads aside, as Django counts it) is answered
  ``413 {"detail": ..., "limit": "DATA_UPLOAD_MAX_MEMORY_SIZE", "max_bytes": N}`` instead of Django's HTML page;
* a JSON body nested deeper than ``REQUEST_JSON_MAX_DEPTH`` (default 64) is answered
  ``400 {"detail": ..., "limit": "REQUEST_JSON_MAX_DEPTH", "max_depth": N}`` before any parser recurses into it.

On every path, a file upload (multipart) declaring more than ``UPLOAD_MAX_BYTES`` is answered 413 naming the cap
(as JSON on the API paths) before Django stores any of it.

:class:`JSONParser` is DRF's JSON parser for the whole API (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``): a body
the middleware did not see (another path) that is nested too deep, or a number with more digits than Python
converts, is a 400 parse error, never a ``RecursionError`` 500.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json

DEFAULT_JSON_MAX_DEPTH = 64
DEFAULT_PATHS = ("/api/", "/retrieve")

# A JSON string, escapes included: removed before brackets are counted, so brackets inside strings do not count.
_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether ``body``'s arrays and objects nest deeper than ``limit`` (without parsing it, without recursion;
    a 20 MB body of brackets in under a second).

    >>> json_depth_exceeds(b'{"a": [[1]]}', 3), json_depth_exceeds(b'{"a": [[1]]}', 2)
    (False, True)
    >>> json_depth_exceeds(b'{"a": "[[[[[["}', 1)
    False
    """
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    brackets = _STRINGS.sub(b"", body).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def json_max_depth() -> int:
    return int(getattr(settings, "REQUEST_JSON_MAX_DEPTH", DEFAULT_JSON_MAX_DEPTH))


def _too_large(limit: int, size: int | None) -> JsonResponse:
    shown = f"{size:,} bytes" if size is not None else "the request body"
    return JsonResponse(
        {
            "detail": f"{shown} is over the limit of {limit:,} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)",
            "limit": "DATA_UPLOAD_MAX_MEMORY_SIZE",
            "max_bytes": limit,
        },
        status=413,
    )


def _upload_too_large(limit: int, size: int, *, api: bool) -> HttpResponse:
    detail = f"the upload of {size:,} bytes is over the limit of {limit:,} bytes (UPLOAD_MAX_BYTES)"
    if api:
        return JsonResponse({"detail": detail, "limit": "UPLOAD_MAX_BYTES", "max_bytes": limit}, status=413)
    return HttpResponse(f"{detail}.\n", status=413, content_type="text/plain; charset=utf-8")


def _too_deep(limit: int) -> JsonResponse:
    return JsonResponse(
        {
            "detail": f"JSON nested deeper than {limit} levels (REQUEST_JSON_MAX_DEPTH)",
            "limit": "REQUEST_JSON_MAX_DEPTH",
            "max_depth": limit,
        },
        status=400,
    )


class RequestLimitsMiddleware:
    """Body size and JSON depth limits on the API paths, answered as JSON (module docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refused = self._check(request)
        return refused if refused is not None else self.get_response(request)

    def _check(self, request: HttpRequest) -> HttpResponse | None:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return None
        try:
            size = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0
        api = request.path.startswith(tuple(getattr(settings, "REQUEST_LIMIT_PATHS", DEFAULT_PATHS)))
        if request.content_type == "multipart/form-data":
            # file uploads (any path): refused by their declared size before Django streams them to disk
            upload_limit = int(getattr(settings, "UPLOAD_MAX_BYTES", 0)) or None
            if upload_limit is not None and size > upload_limit:
                return _upload_too_large(upload_limit, size, api=api)
            return None
        if not api:
            return None
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and size > limit:
            return _too_large(limit, size)
        try:
            body = request.body  # read once; the view's parser reads the cached copy
        except RequestDataTooBig:
            return _too_large(limit, None)
        if body.lstrip()[:1] in (b"{", b"[") and json_depth_exceeds(body, json_max_depth()):
            return _too_deep(json_max_depth())
        request.json_depth_checked = True  # DRF's parser need not scan it again
        return None


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with the depth limit and Python's int-digit limit answered as parse errors (400)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        limit = json_max_depth()
        django_request = getattr(parser_context.get("request"), "_request", None)
        checked = getattr(django_request, "json_depth_checked", False)
        if not checked and json_depth_exceeds(raw, limit):
            raise ParseError(f"JSON parse error - nested deeper than {limit} levels (REQUEST_JSON_MAX_DEPTH)")
        try:
            text = codecs.decode(raw, encoding)
            return json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deep") from None
        except ValueError as exc:  # invalid JSON, bad encoding, an integer beyond Python's digit limit
            raise ParseError(f"JSON parse error - {exc}") from None
