"""Benchmark of the judge layer: HiPRAG over- and under-search detection of 512 trajectories (about 1,500 judge
calls) against a local OpenAI-compatible server that answers every call after 200 ms.

Prints the wall time next to the ideal (calls × latency / concurrency; target: ideal / wall ≥ 0.8), the same with
a warm cache, and a measure of the overlap of judge calls with generation (HiPRAG Appendix I): an evaluation with
a policy that takes 0.3 s per generation batch, judged as trajectories finish, against rollouts-then-judges.

    .venv/bin/python bench/judging.py [--trajectories 512] [--latency 0.2] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import sys
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.backends import Generation, chatml, cut_at_stop
from agent.cache import InMemoryJudgeCache
from agent.evaluate import Judges, evaluate
from agent.judge_client import JudgeEndpoint, OpenAIJudge
from agent.judges import answer_correctness, hiprag_over_search, hiprag_under_search
from agent.rollout import Question, RolloutConfig
from retrieval.searcher import RetrievedDocument
from scoring.formats import parse
from scoring.synthetic import hiprag_trajectory
from scoring.trajectory import Trajectory


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the listen backlog: the default 5 drops the SYNs of 64 concurrent connects


def _serve(latency: float, ports: Any) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in two writes; with Nagle's algorithm on, the body waits for the client's delayed
        # ACK of the headers (up to 40 ms a call). Real servers (uvicorn, vLLM) set TCP_NODELAY; so does this one.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            time.sleep(latency)
            payload = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "bench-judge",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "<answer>False</answer>"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 200, "completion_tokens": 4, "total_tokens": 204},
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    httpd = _Server(("127.0.0.1", 0), Handler)
    ports.put(httpd.server_address[1])
    httpd.serve_forever()


def start_server(latency: float) -> tuple[multiprocessing.Process, str]:
    """The server runs in a process of its own: in this one, its threads would compete with the client for
    the GIL and the benchmark would measure that."""
    ports: Any = multiprocessing.Queue()
    process = multiprocessing.Process(target=_serve, args=(latency, ports), daemon=True)
    process.start()
    return process, f"http://127.0.0.1:{ports.get(timeout=30)}/v1"


class InstantPolicy:
    """A policy that regenerates answers instantly (the benchmark measures the judge layer, not a model)."""

    name = "instant"

    def generate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]:
        return [Generation(f"regenerated answer {len(p)}", "eos") for p in prompts]

    def apply_chat_template(self, messages: Sequence[dict[str, str]]) -> str:
        return chatml(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        return text


async def judge_all(judge: OpenAIJudge, trajectories: list[Trajectory]) -> tuple[int, int]:
    over_task = asyncio.create_task(hiprag_over_search(InstantPolicy(), judge, trajectories, batch_size=64))
    under = await asyncio.gather(*(hiprag_under_search(judge, t) for t in trajectories))
    over = await over_task
    await judge.aclose()  # its HTTP pool belongs to this event loop
    return sum(map(len, over)), sum(map(len, under))


def bench_judging(n: int, latency: float, concurrency: int) -> None:
    httpd, url = start_server(latency)
    rng = random.Random(0)
    trajectories = [parse("hiprag", hiprag_trajectory(rng, malformed_rate=0.0).text) for _ in range(n)]
    cache = InMemoryJudgeCache()
    judge = OpenAIJudge(
        JudgeEndpoint(base_url=url, model="bench-judge", concurrency=concurrency, timeout=30.0), cache=cache
    )
    for label in ("cold cache", "warm cache"):
        before = judge.stats.calls - judge.stats.cache_hits
        started = time.perf_counter()
        n_over, n_under = asyncio.run(judge_all(judge, trajectories))
        wall = time.perf_counter() - started
        calls = n_over + n_under
        http_calls = judge.stats.calls - judge.stats.cache_hits - before
        ideal = http_calls * latency / concurrency
        ratio = f"{ideal / wall:.2f} of ideal" if http_calls else "no HTTP calls"
        print(
            f"{label}: {n} trajectories, {calls} judge calls ({n_over} over-search, {n_under} under-search), "
            f"{http_calls} over HTTP, concurrency {concurrency}: wall {wall:.2f} s, ideal {ideal:.2f} s ({ratio})"
        )
    print(f"judge stats: {judge.stats.as_dict()}")
    httpd.terminate()


class SleepyPolicy:
    """A policy whose every generation batch takes ``seconds`` (a model stand-in); question i answers after
    i % 4 searches, so trajectories finish at different turns."""

    name = "sleepy"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def generate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]:
        time.sleep(self.seconds)
        out = []
        for prompt in prompts:
            wanted = int(prompt.split("Question number ")[1].split("?")[0]) % 4
            done = prompt.count("<information>") - 1  # the instruction mentions the tag once
            text = (
                "<think> more </think><search> q </search>"
                if done < wanted
                else "<think> ok </think><answer> Paris </answer>"
            )
            out.append(Generation(cut_at_stop(text, stop)[0], "stop"))
        return out

    def apply_chat_template(self, messages: Sequence[dict[str, str]]) -> str:
        return chatml(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        return text


class OneDocSearcher:
    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        return [[RetrievedDocument("0", "Paris\nParis is the capital of France.", 1.0)] for _ in queries]


def bench_overlap(latency: float) -> None:
    httpd, url = start_server(latency)
    questions = [Question(str(i), f"Question number {i}?", ("Paris",), "bench") for i in range(64)]
    config = RolloutConfig(max_turns=4)

    async def overlapped() -> float:
        judge = OpenAIJudge(JudgeEndpoint(base_url=url, model="bench-judge", concurrency=8))
        started = time.perf_counter()
        await evaluate(
            SleepyPolicy(0.3),
            OneDocSearcher(),
            "search_r1",
            questions,
            judges=Judges(answer_judge=judge),
            config=config,
            batch_size=64,
        )
        return time.perf_counter() - started

    async def sequential() -> float:
        judge = OpenAIJudge(JudgeEndpoint(base_url=url, model="bench-judge", concurrency=8))
        started = time.perf_counter()
        result = await evaluate(
            SleepyPolicy(0.3), OneDocSearcher(), "search_r1", questions, config=config, batch_size=64
        )
        await asyncio.gather(
            *(
                answer_correctness(judge, r.question.text, r.question.golds, r.trajectory.answer)
                for r in result.records
            )
        )
        return time.perf_counter() - started

    seq = asyncio.run(sequential())
    ovl = asyncio.run(overlapped())
    print(
        f"overlap: 64 questions, 4 generation turns of 0.3 s, 64 judge calls of {latency * 1000:.0f} ms at "
        f"concurrency 8: rollouts then judges {seq:.2f} s, judges as trajectories finish {ovl:.2f} s "
        f"(saves {seq - ovl:.2f} s)"
    )
    httpd.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trajectories", type=int, default=512)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    bench_judging(args.trajectories, args.latency, args.concurrency)
    bench_overlap(args.latency)


if __name__ == "__main__":
    main()
