from __future__ import annotations

from typing import Any

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder


class OrjsonRenderer(JSONRenderer):
    """DRF's JSON renderer with orjson: a 500-step page (~110 kB) encodes in a tenth of a millisecond instead of
    over one, which matters at 20 concurrent clients on two cores. Types orjson does not know (Decimal, lazy
    strings, ...) go through DRF's own encoder."""

    _fallback = JSONEncoder()

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        if data is None:
            return b""
        return orjson.dumps(data, default=self._fallback.default, option=orjson.OPT_NON_STR_KEYS)


class JsonlRenderer(JSONRenderer):
    """Lets ``Accept: application/jsonl`` pass content negotiation on an export view; the view streams the body
    itself, and its errors are still rendered as JSON."""

    media_type = "application/jsonl"
    format = "jsonl"


class CsvRenderer(JSONRenderer):
    """``Accept: text/csv``, as :class:`JsonlRenderer`."""

    media_type = "text/csv"
    format = "csv"
