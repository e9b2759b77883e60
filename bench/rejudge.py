"""Re-judge a 200-trajectory HiPRAG run: once with the evidence heuristic, once with a scripted OpenAI-compatible
judge served over HTTP on this machine. Prints, per judge: wall time, trajectories, verdicts, judge calls, retries,
errors, tokens in and out, and the job's money at a set price.

The run is the demo's 12 HiPRAG trajectories repeated to 200 (a fresh SQLite database in a temporary folder). The
scripted endpoint answers HiPRAG's prompts deterministically, with usage counts, and injects two faults: every 25th
request fails once with HTTP 500 (the client retries it), and the re-ask of the query "Alan Turing" always fails
(those search steps are stored as ``error`` verdicts with the error text, never as a "no").

    .venv/bin/python bench/rejudge.py [--trajectories 200]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
FOLDER = tempfile.mkdtemp(prefix="searchlab-rejudge-")
os.environ["SEARCHLAB_VAR_DIR"] = FOLDER
os.environ["DATABASE_URL"] = f"sqlite:///{FOLDER}/db.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from scoring import formats  # noqa: E402
from webapp.datasets.models import Question  # noqa: E402
from webapp.demo.services import demo_seed  # noqa: E402
from webapp.evaluation.models import JudgePrice  # noqa: E402
from webapp.evaluation.rejudge import judge_cost, rejudge_create, rejudge_execute  # noqa: E402
from webapp.runs.models import Run  # noqa: E402
from webapp.runs.services import run_create  # noqa: E402
from webapp.trajectories.services import TrajectoryInput, trajectory_bulk_create  # noqa: E402

PRICE = (0.15, 0.60)  # per 1M tokens in / out, as a user would set for a small hosted judge


class ScriptedJudge:
    """``/v1/chat/completions`` answering HiPRAG's judge prompts, with usage counts and injected faults."""

    def __init__(self) -> None:
        self.n_requests = 0
        self.lock = threading.Lock()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                content = body["messages"][-1]["content"]
                digest = int(hashlib.sha256(content.encode()).hexdigest(), 16)
                with judge.lock:
                    judge.n_requests += 1
                    transient = judge.n_requests % 25 == 0
                permanent = (
                    "Alan Turing" in content and "Statement" not in content and "Fact-Checker" not in content
                )
                if transient or permanent:
                    self._send(500, {"error": {"message": "scripted fault", "type": "server_error"}})
                    return
                if "Fact-Checker" in content:
                    text = "<answer>False</answer>" if digest % 5 == 0 else "<answer>True</answer>"
                elif "semantically equivalent" in content:
                    text = "<answer>True</answer>" if digest % 4 == 0 else "<answer>False</answer>"
                else:
                    text = "I am not sure."  # the re-ask of a query without retrieval
                usage = {"prompt_tokens": len(content) // 4, "completion_tokens": len(text) // 4}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                choice = {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
                payload = {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model")}
                self._send(200, {**payload, "choices": [choice], "usage": usage})

            def _send(self, status: int, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def write_run(n: int) -> Run:
    demo = Run.objects.get(name="HiPRAG (demo)")
    sources = list(demo.trajectories.select_related("question").order_by("pk"))
    run = run_create(name=f"HiPRAG · {n} trajectories (bench)", method="hiprag", model_name="demo-agent")
    items = []
    for i in range(n):
        source = sources[i % len(sources)]
        question: Question | None = source.question
        items.append(
            TrajectoryInput(
                parsed=formats.parse("hiprag", source.raw_text),
                golden_answers=list(source.golden_answers),
                question_text=source.question_text,
                question_id=question.pk if question else None,
                dataset_id=source.dataset_id,
                run_id=run.pk,
            )
        )
    trajectory_bulk_create(items=items)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED)
    run.refresh_from_db()
    return run


def main() -> None:
    import logging

    for handler in logging.getLogger().handlers:  # httpx logs one line per request otherwise
        handler.addFilter(lambda record: not record.name.startswith(("httpx", "openai")))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=200)
    args = parser.parse_args()
    if args.trajectories < 1:
        parser.error("--trajectories must be at least 1")
    call_command("migrate", verbosity=0)
    demo_seed()
    run = write_run(args.trajectories)
    n_steps = sum(run.trajectories.values_list("n_steps", flat=True))
    server = ScriptedJudge()
    JudgePrice.objects.create(model="scripted-judge", input_per_million=PRICE[0], output_per_million=PRICE[1])
    print(f"run #{run.pk}: {args.trajectories} trajectories, {n_steps} steps")
    print(
        "| judge | version | wall s | trajectories | verdicts | calls | retries | errors | tokens in | tokens out | cost |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    judges = (
        {"kind": "evidence"},
        {"kind": "openai", "base_url": server.base_url, "model": "scripted-judge", "max_retries": 2},
    )
    try:
        for judge in judges:
            started = time.perf_counter()
            job = rejudge_execute(job_id=rejudge_create(run=run, judge=judge, enqueue=False).pk)
            wall = time.perf_counter() - started
            assert job.version is not None
            cost = judge_cost(job.version.model, job.prompt_tokens, job.completion_tokens)
            shown = f"{cost[0]:.5f} {cost[1]}" if cost else "—"
            print(
                f"| {judge['kind']} | {job.version.name} | {wall:.2f} | {job.n_done} | {job.n_verdicts} | "
                f"{job.n_calls} | {job.n_retries} | {job.n_errors} | {job.prompt_tokens} | "
                f"{job.completion_tokens} | {shown} |"
            )
            if job.status != job.Status.FINISHED:
                print(f"  job {job.pk} {job.status}: {job.error}")
    finally:
        server.close()


if __name__ == "__main__":
    import shutil

    try:
        main()
    finally:
        shutil.rmtree(FOLDER, ignore_errors=True)
