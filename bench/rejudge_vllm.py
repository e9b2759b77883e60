"""Re-judge a 200-trajectory HiPRAG run against a real ``vllm serve`` of SmolLM2-135M-Instruct on this machine.

Prints the server's start-up time and the job's wall time, trajectories, verdicts, judge calls, retries, failed
calls and tokens in and out. The run is ``bench/rejudge.py``'s (the demo's 12 HiPRAG trajectories repeated, in a
fresh SQLite database in a temporary folder); the server is started as ``tests/agent/vllm_server.py`` starts it,
compiled as vLLM does by default (``--eager`` skips the compile, as the tests do). Needs ``.venv-vllm`` (``make vllm``):

    .venv-vllm/bin/python bench/rejudge_vllm.py [--trajectories 200] [--eager]

A 135M judge mostly breaks HiPRAG's ``<answer>True</answer>`` format, so most verdicts are unparseable replies
(stored as ``error`` verdicts with the reply): the figure measures the path (server, client, token counts), not a
judge worth auditing. ``failed calls`` counts the verdicts whose call itself failed (``error:`` replies).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from django.core.management import call_command  # noqa: E402

from bench.rejudge import FOLDER, write_run  # noqa: E402  (sets up Django on a fresh SQLite database in FOLDER)
from tests.agent.vllm_server import SERVED_NAME, smollm2_server  # noqa: E402
from webapp.demo.services import demo_seed  # noqa: E402
from webapp.evaluation.rejudge import rejudge_create, rejudge_execute  # noqa: E402
from webapp.trajectories.models import JudgeVerdict  # noqa: E402


def main() -> None:
    import logging

    for handler in logging.getLogger().handlers:  # httpx logs one line per request otherwise
        handler.addFilter(lambda record: not record.name.startswith(("httpx", "openai")))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=200)
    parser.add_argument("--eager", action="store_true", help="serve without vLLM's start-up compile")
    args = parser.parse_args()
    if args.trajectories < 1:
        parser.error("--trajectories must be at least 1")
    call_command("migrate", verbosity=0)
    demo_seed()
    run = write_run(args.trajectories)
    n_steps = sum(run.trajectories.values_list("n_steps", flat=True))
    print(f"run #{run.pk}: {args.trajectories} trajectories, {n_steps} steps")
    log = Path(FOLDER) / "serve.log"
    started = time.perf_counter()
    with smollm2_server(log, eager=args.eager) as url:
        print(
            f"vllm serve up in {time.perf_counter() - started:.1f} s ({'eager' if args.eager else 'compiled'})"
        )
        judge = {"kind": "openai", "base_url": url, "model": SERVED_NAME, "max_tokens": 128, "timeout": 120.0}
        started = time.perf_counter()
        job = rejudge_execute(job_id=rejudge_create(run=run, judge=judge, enqueue=False).pk)
        wall = time.perf_counter() - started
    failed = JudgeVerdict.objects.filter(version=job.version, raw_reply__startswith="error:").count()
    print(
        "| wall s | trajectories | verdicts | calls | retries | error verdicts | failed calls | tokens in | tokens out |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {wall:.1f} | {job.n_done} | {job.n_verdicts} | {job.n_calls} | {job.n_retries} | {job.n_errors} | "
        f"{failed} | {job.prompt_tokens:,} | {job.completion_tokens:,} |"
    )
    if job.status != job.Status.FINISHED:
        print(f"job {job.pk} {job.status}: {job.error}")


if __name__ == "__main__":
    import shutil

    try:
        main()
    finally:
        shutil.rmtree(FOLDER, ignore_errors=True)
