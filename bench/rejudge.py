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
import os
import sys
import tempfile
import time
from pathlib import Path

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

from bench.scripted_chat_server import ScriptedChatServer, hiprag_reply  # noqa: E402
from scoring import formats  # noqa: E402
from webapp.datasets.models import Question  # noqa: E402
from webapp.demo.services import demo_seed  # noqa: E402
from webapp.evaluation.models import JudgePrice  # noqa: E402
from webapp.evaluation.rejudge import judge_cost, rejudge_create, rejudge_execute  # noqa: E402
from webapp.runs.models import Run  # noqa: E402
from webapp.runs.services import run_create  # noqa: E402
from webapp.trajectories.services import TrajectoryInput, trajectory_bulk_create  # noqa: E402

PRICE = (0.15, 0.60)  # per 1M tokens in / out, as a user would set for a small hosted judge


def scripted_judge() -> ScriptedChatServer:
    """HiPRAG's judges over HTTP; every 25th request fails once (retried), and the re-ask of one query (the Alan
    Turing question's) always fails: its steps are stored as errors."""

    def reply(content: str, n: int) -> str | tuple[int, str]:
        permanent = "Alan Turing" in content and "Statement" not in content and "Fact-Checker" not in content
        if n % 25 == 0 or permanent:
            return 500, "scripted fault"
        return hiprag_reply(content, fact_false_every=5, equivalent_true_every=4)

    return ScriptedChatServer(reply)


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
    server = scripted_judge()
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
