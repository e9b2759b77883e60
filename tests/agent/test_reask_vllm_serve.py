"""The re-ask judge (HiPRAG's over-search test) against a real ``vllm serve`` of SmolLM2 on the CPU.

Marked ``vllm`` (and ``slow``); skipped where vLLM is not importable. Run in ``.venv-vllm`` (``make vllm``):
``.venv-vllm/bin/python -m pytest -m vllm tests/agent/test_reask_vllm_serve.py -s`` — it prints the throughput and
the error count. The server re-asks each query without retrieval and judges the equivalence with Fig. 5's prompt;
a 135M judge mostly breaks the ``<answer>True</answer>`` format (UNPARSEABLE), which is a verdict, not an error:
the test asserts that every call came back (no ERROR), not that the judge is any good.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (make vllm builds .venv-vllm)")

from agent.judge_client import JudgeEndpoint, JudgeStats, OpenAIJudge
from agent.judges import hiprag_over_search
from scoring.formats import parse
from tests.agent.vllm_server import smollm2_server
from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


# The one server of the pytest session: the re-judge test imports this fixture, and a fixture imported into a
# second module is a second fixture definition there, so the server itself is kept here, not in pytest's cache.
_session_server: dict[str, str] = {}


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``vllm serve`` of SmolLM2 (eager: no start-up compile), started once per pytest session."""
    if "url" in _session_server:
        yield _session_server["url"]
        return
    with smollm2_server(tmp_path_factory.mktemp("vllm") / "serve.log", eager=True) as url:
        _session_server["url"] = url
        try:
            yield url
        finally:
            _session_server.clear()


def test_the_re_ask_judge_runs_against_vllm_serve(served: str) -> None:
    import asyncio
    import json

    rows = [
        json.loads(line)
        for line in (REPO_ROOT / "demo" / "trajectories_hiprag.jsonl").read_text().splitlines()
    ]
    trajectories = [parse("hiprag", row["response"]) for row in rows]
    trajectories = [t for t in trajectories if t.valid]
    stats = JudgeStats()
    client = OpenAIJudge(
        JudgeEndpoint(base_url=served, model="smollm2", timeout=120.0, concurrency=8, max_tokens=128),
        stats=stats,
    )
    started = time.perf_counter()
    results = asyncio.run(hiprag_over_search(None, client, trajectories, regenerator=client))
    seconds = time.perf_counter() - started
    outcomes = Counter(r.verdict.value for row in results for r in row if r.verdict is not None)
    steps = sum(len(t.search_steps) for t in trajectories)
    print(
        f"\nre-ask on vllm serve: {steps} search steps, {stats.calls} calls in {seconds:.1f} s "
        f"({stats.calls / seconds:.2f} calls/s, {stats.completion_tokens / seconds:.1f} completion tokens/s), "
        f"outcomes {dict(outcomes)}, errors {stats.errors}, retries {stats.retries}"
    )
    assert sum(outcomes.values()) == steps
    assert outcomes["error"] == 0 and stats.errors == 0
    assert all(r.regenerated for row in results for r in row)  # every query was answered without retrieval
