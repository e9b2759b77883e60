"""The judge client over real HTTP: retries, backoff, timeouts, 429/5xx, malformed replies, ERROR, cache, keys."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from agent.cache import InMemoryJudgeCache
from agent.judge_client import JudgeEndpoint, JudgeStats, OpenAIJudge
from agent.judges import answer_correctness, hiprag_under_search
from scoring.formats import parse
from scoring.verdicts import Verdict
from tests.agent.conftest import Reply, ScriptedServer

MESSAGES = [{"role": "user", "content": "Is Paris the capital of France?"}]


def make_judge(server: ScriptedServer, **overrides: object) -> tuple[OpenAIJudge, list[float]]:
    """A judge whose backoff sleeps are recorded and skipped (the tests stay fast; the delays are checked)."""
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    fields: dict[str, object] = {
        "base_url": server.base_url,
        "model": "judge-m",
        "timeout": 2.0,
        "max_retries": 3,
    }
    fields.update(overrides)
    judge = OpenAIJudge(JudgeEndpoint(**fields), sleep=sleep, rng=random.Random(0))  # type: ignore[arg-type]
    return judge, delays


@pytest.mark.parametrize(
    ("script", "overrides", "text", "attempts"),
    [
        # a 500 then success: retried once
        ([Reply(status=500), Reply("<answer>True</answer>")], {}, "<answer>True</answer>", 2),
        # rate limited twice, then success
        ([Reply(status=429), Reply(status=429), Reply("ok")], {}, "ok", 3),
        # a 503 and a 502 are 5xx too
        ([Reply(status=503), Reply(status=502), Reply("ok")], {}, "ok", 3),
        # an injected timeout (the reply comes after the client's 0.3 s timeout), then success
        ([Reply("late", delay=1.0), Reply("ok")], {"timeout": 0.3}, "ok", 2),
        # a garbled body (HTML where JSON was promised) is a server fault: retried
        ([Reply(garbage=True), Reply("ok")], {}, "ok", 2),
        # a 400 is not retried: the same request stays bad
        ([Reply(status=400)], {}, None, 1),
        # a 401 (bad key) is not retried either
        ([Reply(status=401)], {}, None, 1),
        # 5xx on every attempt: ERROR after max_retries + 1 attempts
        ([Reply(status=500)] * 3, {"max_retries": 2}, None, 3),
    ],
)
def test_it_retries_what_is_transient_and_reports_the_rest(
    server: ScriptedServer, script: list[Reply], overrides: dict[str, object], text: str | None, attempts: int
) -> None:
    server.script(*script)
    judge, delays = make_judge(server, **overrides)
    reply = asyncio.run(judge.chat(MESSAGES))
    assert reply.text == text
    assert reply.attempts == attempts
    assert len(server.requests) == attempts
    assert len(delays) == (attempts - 1 if text is not None or attempts > 1 else 0)
    if text is None:
        assert reply.error is not None and judge.stats.errors == 1


def test_it_gives_an_error_verdict_after_the_last_retry_never_a_silent_no(server: ScriptedServer) -> None:
    server.script(*[Reply(status=500)] * 4)
    judge, _ = make_judge(server)
    result = asyncio.run(answer_correctness(judge, "q?", ["Paris"], "Paris"))
    assert result.verdict is Verdict.ERROR
    assert "HTTP 500" in (result.error or "") and "after 4 attempts" in (result.error or "")
    assert judge.stats.by_detector["answer"] == {"error": 1}


def test_it_reads_a_malformed_reply_as_unparseable_without_retrying(server: ScriptedServer) -> None:
    server.script("I think the step is fine.")
    judge, delays = make_judge(server)
    trajectory = parse(
        "hiprag",
        "<think><step><reasoning>r</reasoning><conclusion>Paris is in France.</conclusion></step></think>"
        "<answer>Paris</answer>",
    )
    [result] = asyncio.run(hiprag_under_search(judge, trajectory))
    assert result.verdict is Verdict.UNPARSEABLE
    assert len(server.requests) == 1 and delays == []
    assert judge.stats.unparseable == 1


def test_it_backs_off_exponentially_with_full_jitter_and_honours_retry_after(server: ScriptedServer) -> None:
    judge, _ = make_judge(server, backoff_base=0.5, backoff_max=4.0)
    for attempt in range(6):
        cap = min(4.0, 0.5 * 2**attempt)
        samples = [judge.backoff(attempt) for _ in range(200)]
        assert all(0.0 <= s <= cap for s in samples)
        assert max(samples) > 0.6 * cap  # the whole range is used (full jitter), not a fixed delay
    assert judge.backoff(0, retry_after=3.0) >= 3.0
    assert judge.backoff(0, retry_after=60.0) <= 4.0  # capped
    server.script(Reply(status=429, headers={"retry-after": "2"}), Reply("ok"))
    judge, delays = make_judge(server, backoff_max=4.0)
    asyncio.run(judge.chat(MESSAGES))
    assert delays and delays[0] >= 2.0


def test_it_serves_a_repeated_call_from_the_cache(server: ScriptedServer) -> None:
    cache = InMemoryJudgeCache()
    judge, _ = make_judge(server)
    judge.cache = cache

    async def twice() -> tuple[object, object]:
        return await judge.chat(MESSAGES), await judge.chat(MESSAGES)

    first, second = asyncio.run(twice())
    assert len(server.requests) == 1
    assert second.cached and second.text == first.text  # type: ignore[attr-defined]
    assert judge.stats.cache_hits == 1 and judge.stats.calls == 2
    assert judge.stats.prompt_tokens == 11 and judge.stats.completion_tokens == 3


def test_it_does_not_cache_errors(server: ScriptedServer) -> None:
    cache = InMemoryJudgeCache()
    server.script(Reply(status=400), Reply("ok"))
    judge, _ = make_judge(server)
    judge.cache = cache
    assert asyncio.run(judge.chat(MESSAGES)).text is None
    assert len(cache) == 0
    assert asyncio.run(judge.chat(MESSAGES)).text == "ok"


def test_it_shares_identical_calls_in_flight(server: ScriptedServer) -> None:
    server.delay = 0.2
    judge, _ = make_judge(server)

    async def together() -> list[object]:
        return list(await asyncio.gather(*(judge.chat(MESSAGES) for _ in range(5))))

    replies = asyncio.run(together())
    assert len(server.requests) == 1 and len(replies) == 5


def test_it_bounds_concurrency(server: ScriptedServer) -> None:
    server.delay = 0.1
    judge, _ = make_judge(server, concurrency=3)

    async def many() -> None:
        await asyncio.gather(*(judge.chat([{"role": "user", "content": str(i)}]) for i in range(12)))

    asyncio.run(many())
    assert server.max_in_flight == 3
    assert judge.stats.latency_seconds >= 12 * 0.1


def test_it_never_shows_the_api_key(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-test-THIS-MUST-NOT-LEAK-0123456789"
    monkeypatch.setenv("SEARCHLAB_TEST_JUDGE_KEY", secret)
    caplog.set_level(logging.DEBUG)
    server.script(Reply(status=401), Reply("ok"))
    judge, _ = make_judge(server, api_key_env="SEARCHLAB_TEST_JUDGE_KEY")
    failed = asyncio.run(judge.chat(MESSAGES))
    ok = asyncio.run(judge.chat([{"role": "user", "content": "again"}]))
    assert server.headers[0]["authorization"] == f"Bearer {secret}"  # read from the NAMED variable
    shown = [
        repr(judge),
        str(judge),
        repr(judge.endpoint),
        repr(failed),
        repr(ok),
        caplog.text,
        repr(judge.stats),
    ]
    assert all(secret not in text for text in shown)
    assert "SEARCHLAB_TEST_JUDGE_KEY" in repr(judge)


def test_it_refuses_a_missing_key_variable(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEARCHLAB_ABSENT_KEY", raising=False)
    with pytest.raises(ValueError, match="SEARCHLAB_ABSENT_KEY"):
        make_judge(server, api_key_env="SEARCHLAB_ABSENT_KEY")


def test_it_sums_stats_per_run(server: ScriptedServer) -> None:
    stats = JudgeStats()
    server.script(Reply(status=500), "ok", "ok")
    judge, _ = make_judge(server)
    judge.stats = stats

    async def two() -> None:
        await judge.chat([{"role": "user", "content": "a"}])
        await judge.chat([{"role": "user", "content": "b"}])

    asyncio.run(two())
    assert (stats.calls, stats.attempts, stats.retries, stats.errors) == (2, 3, 1, 0)
    assert stats.as_dict()["prompt_tokens"] == 22
