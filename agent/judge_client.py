"""LLM judge clients: any OpenAI-compatible chat endpoint, or an in-process transformers model.

Both give :meth:`ChatJudge.chat` → :class:`JudgeReply` and never raise for a failed call: after the last retry
the reply carries ``error`` (the detectors turn it into ``Verdict.ERROR``, counted per run, never a silent "no").

OpenAI-compatible endpoint (:class:`OpenAIJudge`, ``openai.AsyncOpenAI``):

* bounded concurrency (a semaphore, held only while a request is in flight, not during a backoff sleep);
* per-call timeout; retries on timeouts, connection errors, 429, 5xx and garbled response bodies, with
  exponential backoff and full jitter (delay ~ U(0, min(cap, base·2^attempt)), and at least ``Retry-After`` on a
  429 that sends one); no retry on other 4xx (a bad request or a bad key stays bad);
* a reply that arrives but is not in the judge's format is NOT retried: it is returned, and the detector's
  scoring parser makes it ``UNPARSEABLE`` (at temperature 0 the same request gives the same reply);
* a cache by content hash (:mod:`agent.cache`), and identical requests in flight at the same time share one call;
* tokens and latency per call, summed per run in :class:`JudgeStats` (:mod:`agent.judge_stats`).

The API key is read from the environment variable whose NAME is configured, each time a client is built; it is
never an attribute of these objects, never in their ``repr`` and never logged.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from agent.backend_openai import read_api_key
from agent.backends import Message
from agent.cache import CachedReply, JudgeCache, cache_key
from agent.judge_stats import JUDGE_COST_KEYS, JudgeCostMeter, JudgeStats

__all__ = [  # the cost accounting stays importable from here
    "JUDGE_COST_KEYS",
    "ChatJudge",
    "JudgeCostMeter",
    "JudgeEndpoint",
    "JudgeReply",
    "JudgeStats",
    "OpenAIJudge",
    "TransformersJudge",
]


@dataclass(frozen=True, slots=True)
class JudgeEndpoint:
    """Where a judge lives. ``api_key_env`` is the NAME of the environment variable holding the key."""

    base_url: str
    model: str
    api_key_env: str | None = None
    timeout: float = 60.0
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 20.0
    concurrency: int = 32
    temperature: float = 0.0
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class JudgeReply:
    text: str | None  # None when the call failed
    model: str
    error: str | None = None
    latency: float = 0.0  # seconds in flight plus backoff sleeps (not queueing for a slot); 0 for a cache hit
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    cached: bool = False


class ChatJudge(Protocol):
    model: str
    stats: JudgeStats

    async def chat(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> JudgeReply: ...


class _CachingJudge:
    """Cache, in-flight sharing and stats around a subclass's ``_call``."""

    model: str

    def __init__(self, cache: JudgeCache | None, stats: JudgeStats | None, params: dict[str, Any]) -> None:
        self.cache = cache
        self.stats = stats if stats is not None else JudgeStats()
        self._params = params
        self._in_flight: dict[str, asyncio.Future[JudgeReply]] = {}

    async def chat(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> JudgeReply:
        params = {
            **self._params,
            "max_tokens": max_tokens if max_tokens is not None else self._params["max_tokens"],
        }
        key = cache_key(self.model, messages, params)
        self.stats.calls += 1
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            self.stats.cache_hits += 1
            return JudgeReply(
                cached.text,
                self.model,
                prompt_tokens=cached.prompt_tokens,
                completion_tokens=cached.completion_tokens,
                cached=True,
            )
        shared = self._in_flight.get(key)
        if shared is not None:
            self.stats.cache_hits += 1
            reply = await asyncio.shield(shared)
            return JudgeReply(**{**asdict(reply), "cached": True, "latency": 0.0})
        future: asyncio.Future[JudgeReply] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            reply = await self._call(list(messages), params)
            future.set_result(reply)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        finally:
            del self._in_flight[key]
        self.stats.attempts += reply.attempts
        self.stats.retries += max(reply.attempts - 1, 0)
        self.stats.latency_seconds += reply.latency
        self.stats.prompt_tokens += reply.prompt_tokens
        self.stats.completion_tokens += reply.completion_tokens
        if reply.error is not None:
            self.stats.errors += 1
        elif self.cache is not None and reply.text is not None:
            self.cache.put(key, CachedReply(reply.text, reply.prompt_tokens, reply.completion_tokens))
        return reply

    async def _call(self, messages: list[Message], params: dict[str, Any]) -> JudgeReply:
        raise NotImplementedError


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _Fatal(Exception):
    pass


class OpenAIJudge(_CachingJudge):
    def __init__(
        self,
        endpoint: JudgeEndpoint,
        *,
        cache: JudgeCache | None = None,
        stats: JudgeStats | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(
            cache, stats, {"temperature": endpoint.temperature, "max_tokens": endpoint.max_tokens}
        )
        self.endpoint = endpoint
        self.model = endpoint.model
        read_api_key(endpoint.api_key_env)  # fail early when the named variable is missing
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, Any, asyncio.Semaphore]] = {}

    def __repr__(self) -> str:
        e = self.endpoint
        return f"OpenAIJudge(base_url={e.base_url!r}, model={e.model!r}, api_key_env={e.api_key_env!r})"

    def _client(self) -> tuple[Any, asyncio.Semaphore]:
        # httpx's async pool and the semaphore belong to one event loop; evaluation may run several loops.
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is None or entry[0] is not loop:
            from openai import AsyncOpenAI

            client = AsyncOpenAI(
                base_url=self.endpoint.base_url,
                api_key=read_api_key(self.endpoint.api_key_env),
                timeout=self.endpoint.timeout,
                max_retries=0,  # retries are ours: backoff with jitter, counted, ERROR at the end
            )
            entry = (loop, client, asyncio.Semaphore(self.endpoint.concurrency))
            self._clients[id(loop)] = entry
        return entry[1], entry[2]

    async def aclose(self) -> None:
        for _, client, _ in self._clients.values():
            await client.close()
        self._clients.clear()

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Full jitter: U(0, min(cap, base·2^attempt)), at least ``Retry-After`` (capped) when the server sent one."""
        e = self.endpoint
        delay = self._rng.uniform(0.0, min(e.backoff_max, e.backoff_base * 2**attempt))
        if retry_after is not None:
            delay = max(delay, min(retry_after, e.backoff_max))
        return delay

    async def _call(self, messages: list[Message], params: dict[str, Any]) -> JudgeReply:
        client, semaphore = self._client()
        spent = 0.0  # in flight and backing off; not the time spent waiting for a concurrency slot
        error = ""
        attempts = 0
        for attempt in range(self.endpoint.max_retries + 1):
            attempts += 1
            try:
                async with semaphore:
                    started = time.perf_counter()
                    try:
                        text, prompt_tokens, completion_tokens = await self._attempt(client, messages, params)
                    finally:
                        spent += time.perf_counter() - started
                return JudgeReply(
                    text,
                    self.model,
                    latency=spent,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    attempts=attempts,
                )
            except _Fatal as exc:
                error = str(exc)
                break
            except _Retryable as exc:
                error = str(exc)
                if attempt == self.endpoint.max_retries:
                    break
                delay = self.backoff(attempt, exc.retry_after)
                await self._sleep(delay)
                spent += delay
        return JudgeReply(
            None,
            self.model,
            error=f"{error} (after {attempts} attempt{'s' * (attempts > 1)})",
            latency=spent,
            attempts=attempts,
        )

    async def _attempt(
        self, client: Any, messages: list[Message], params: dict[str, Any]
    ) -> tuple[str, int, int]:
        import openai

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": params["temperature"],
        }
        if params["max_tokens"] is not None:
            kwargs["max_tokens"] = params["max_tokens"]
        try:
            response = await client.chat.completions.create(**kwargs, timeout=self.endpoint.timeout)
        except openai.APITimeoutError:
            raise _Retryable(f"timeout after {self.endpoint.timeout:g} s") from None
        except openai.APIConnectionError as exc:
            raise _Retryable(f"connection error: {exc}") from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            message = f"HTTP {status}: {_short(exc.message)}"
            if status == 429:
                raise _Retryable(message, _retry_after(exc.response.headers.get("retry-after"))) from None
            if status >= 500:
                raise _Retryable(message) from None
            raise _Fatal(message) from None
        except (openai.APIResponseValidationError, ValueError) as exc:  # ValueError: a body that is not JSON
            raise _Retryable(f"malformed response body: {_short(str(exc))}") from None
        try:
            text = response.choices[0].message.content
            usage = response.usage
        except (AttributeError, IndexError, TypeError) as exc:
            raise _Retryable(f"malformed response body: {_short(str(exc))}") from None
        if not isinstance(text, str):
            raise _Retryable("malformed response body: no message content")
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        return text, prompt_tokens, completion_tokens


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _retry_after(value: str | None) -> float | None:
    try:
        return None if value is None else max(float(value), 0.0)
    except ValueError:
        return None


class TransformersJudge(_CachingJudge):
    """An in-process model as judge: concurrent requests are gathered into batches of up to ``max_batch`` and
    answered by one greedy ``chat`` call each (the model is not thread-safe; batching is what makes it fast)."""

    def __init__(
        self,
        backend: Any,
        *,
        max_new_tokens: int = 256,
        max_batch: int = 8,
        cache: JudgeCache | None = None,
        stats: JudgeStats | None = None,
    ) -> None:
        super().__init__(cache, stats, {"temperature": 0.0, "max_tokens": max_new_tokens})
        self.backend = backend
        self.model = str(getattr(backend, "name", "transformers"))
        self.max_batch = max_batch
        self._queue: list[tuple[list[Message], int, asyncio.Future[JudgeReply]]] = []
        self._worker: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"TransformersJudge(model={self.model!r})"

    async def _call(self, messages: list[Message], params: dict[str, Any]) -> JudgeReply:
        future: asyncio.Future[JudgeReply] = asyncio.get_running_loop().create_future()
        self._queue.append((messages, int(params["max_tokens"]), future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        await asyncio.sleep(0)  # let the other requests of this tick join the batch
        while self._queue:
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            started = time.perf_counter()
            max_tokens = max(item[1] for item in batch)
            try:
                generations = await asyncio.to_thread(
                    self.backend.chat, [item[0] for item in batch], max_new_tokens=max_tokens
                )
            except Exception as exc:  # a model failure is an error verdict, like an API failure
                for _, _, future in batch:
                    future.set_result(
                        JudgeReply(None, self.model, error=f"{type(exc).__name__}: {exc}", attempts=1)
                    )
                continue
            latency = time.perf_counter() - started
            for (_, _, future), generation in zip(batch, generations, strict=True):
                future.set_result(
                    JudgeReply(
                        generation.text,
                        self.model,
                        latency=latency,
                        prompt_tokens=generation.prompt_tokens,
                        completion_tokens=generation.completion_tokens,
                        attempts=1,
                    )
                )
