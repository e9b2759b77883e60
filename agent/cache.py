"""Judge-call cache keyed by content hash, so that re-scoring the same trajectories costs nothing.

The key is ``sha256`` of the judge model, the messages and the sampling parameters (canonical JSON). The
:class:`JudgeCache` protocol is what the judges take; :class:`InMemoryJudgeCache` lives for one process, and the web
app provides a database-backed one (``JudgeCallCache``). Only successful replies are cached — never errors — and an
unparseable reply is cached like any other (asking again at temperature 0 would return it again).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class CachedReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class JudgeCache(Protocol):
    def get(self, key: str) -> CachedReply | None: ...

    def put(self, key: str, reply: CachedReply) -> None: ...


class InMemoryJudgeCache:
    def __init__(self) -> None:
        self._replies: dict[str, CachedReply] = {}

    def get(self, key: str) -> CachedReply | None:
        return self._replies.get(key)

    def put(self, key: str, reply: CachedReply) -> None:
        self._replies[key] = reply

    def __len__(self) -> int:
        return len(self._replies)


def cache_key(model: str, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]) -> str:
    """``sha256(model + messages + params)`` over canonical JSON.

    >>> cache_key("m", [{"role": "user", "content": "hi"}], {"temperature": 0}) == cache_key(
    ...     "m", [{"content": "hi", "role": "user"}], {"temperature": 0})
    True
    """
    payload = json.dumps(
        {"model": model, "messages": [dict(m) for m in messages], "params": dict(params)},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
