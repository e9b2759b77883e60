"""Re-judging a 200-trajectory HiPRAG run with a real ``vllm serve`` of SmolLM2 on the CPU as the judge endpoint.

Marked ``vllm`` (and ``slow``); skipped where vLLM is not importable. Run in ``.venv-vllm`` (``make vllm``):
``.venv-vllm/bin/python -m pytest -m vllm tests/webapp/evaluation/test_rejudge_vllm.py -s`` — it prints the job's
time, calls, tokens and errors. A 135M judge mostly breaks HiPRAG's ``<answer>True</answer>`` format: such a reply
is an unparseable verdict (stored as ``error`` with the reply, as every judge error is), so the test asserts that
every judge *call* came back, not that the judge is any good.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (make vllm builds .venv-vllm)")

from scoring import formats
from tests.agent.test_reask_vllm_serve import served  # noqa: F401  (the module-scoped server fixture)
from webapp.evaluation.rejudge import rejudge_create, rejudge_execute
from webapp.runs.models import Run
from webapp.runs.services import run_create
from webapp.trajectories.models import JudgeVerdict
from webapp.trajectories.services import TrajectoryInput, trajectory_bulk_create

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.django_db]
N_TRAJECTORIES = 200


def two_hundred_trajectories() -> Run:
    from webapp.demo.services import demo_seed

    demo_seed()
    sources = list(Run.objects.get(name="HiPRAG (demo)").trajectories.order_by("pk"))
    run = run_create(name="HiPRAG · 200 trajectories (vllm)", method="hiprag", model_name="demo-agent")
    trajectory_bulk_create(
        items=[
            TrajectoryInput(
                parsed=formats.parse("hiprag", source.raw_text),
                golden_answers=list(source.golden_answers),
                question_text=source.question_text,
                question_id=source.question_id,
                run_id=run.pk,
            )
            for source in (sources[i % len(sources)] for i in range(N_TRAJECTORIES))
        ]
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED)
    run.refresh_from_db()
    return run


def test_a_200_trajectory_run_is_rejudged_by_vllm_serve(served: Any) -> None:  # noqa: F811
    run = two_hundred_trajectories()
    judge = {"kind": "openai", "base_url": served, "model": "smollm2", "max_tokens": 128, "timeout": 120.0}
    started = time.perf_counter()
    job = rejudge_execute(job_id=rejudge_create(run=run, judge=judge, enqueue=False).pk)
    seconds = time.perf_counter() - started
    mine = JudgeVerdict.objects.filter(version=job.version)
    failed_calls = mine.filter(raw_reply__startswith="error:").count()
    print(
        f"\nre-judge on vllm serve: {job.n_done} trajectories, {job.n_verdicts} verdicts, {job.n_calls} calls in "
        f"{seconds:.1f} s, tokens {job.prompt_tokens} in / {job.completion_tokens} out, {job.n_errors} error "
        f"verdicts ({failed_calls} failed calls, the rest unparseable), {job.n_retries} retries"
    )
    assert job.status == job.Status.FINISHED, job.error
    assert job.n_done == N_TRAJECTORIES and job.n_verdicts == sum(t.n_steps for t in run.trajectories.all())
    assert failed_calls == 0 and job.prompt_tokens > 0
