"""Re-judging a HiPRAG run with a real ``vllm serve`` of SmolLM2 on the CPU as the judge endpoint.

Marked ``vllm`` (and ``slow``); skipped where vLLM is not importable. Run in ``.venv-vllm`` (``make vllm``):
``.venv-vllm/bin/python -m pytest -m vllm tests/webapp/evaluation/test_rejudge_vllm.py -s`` — it prints the job's
time, calls, tokens and errors. The run is the demo's 12 HiPRAG trajectories, each once: every judge prompt the
re-judge sends, on a run small enough to test the path (``bench/rejudge_vllm.py`` times 200 trajectories). A 135M
judge mostly breaks HiPRAG's ``<answer>True</answer>`` format: such a reply is an unparseable verdict (stored as
``error`` with the reply, as every judge error is), so the test asserts that every judge *call* came back and every
verdict was stored, not that the judge is any good. ``make vllm-test`` runs it in the process of tests/agent, on the
same server (the ``served`` fixture is session-scoped).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (make vllm builds .venv-vllm)")

from scoring import formats
from tests.agent.test_reask_vllm_serve import served  # noqa: F401  (the session's server fixture)
from webapp.evaluation.rejudge import rejudge_create, rejudge_execute
from webapp.runs.models import Run
from webapp.runs.services import run_create
from webapp.trajectories.models import JudgeVerdict
from webapp.trajectories.services import TrajectoryInput, trajectory_bulk_create

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.django_db]


def demo_hiprag_copy() -> Run:
    """A finished copy of the demo's HiPRAG run (12 trajectories), with no verdicts of its own yet."""
    from webapp.demo.services import demo_seed

    demo_seed()
    sources = list(Run.objects.get(name="HiPRAG (demo)").trajectories.order_by("pk"))
    run = run_create(
        name=f"HiPRAG · {len(sources)} trajectories (vllm)", method="hiprag", model_name="demo-agent"
    )
    trajectory_bulk_create(
        items=[
            TrajectoryInput(
                parsed=formats.parse("hiprag", source.raw_text),
                golden_answers=list(source.golden_answers),
                question_text=source.question_text,
                question_id=source.question_id,
                run_id=run.pk,
            )
            for source in sources
        ]
    )
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED)
    run.refresh_from_db()
    return run


def test_a_run_is_rejudged_by_vllm_serve(served: Any) -> None:  # noqa: F811
    run = demo_hiprag_copy()
    n_trajectories = run.trajectories.count()
    n_steps = sum(t.n_steps for t in run.trajectories.all())
    assert n_trajectories == 12 and n_steps > n_trajectories  # the demo's run, several steps each
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
    assert job.n_done == n_trajectories and job.n_verdicts == n_steps
    assert mine.count() == n_steps  # every verdict stored under the re-judge's version...
    assert all(v.raw_reply for v in mine)  # ...with the judge's reply (or the error) beside it
    assert failed_calls == 0 and job.n_calls >= n_steps  # every call came back: a reply, parseable or not
    assert job.prompt_tokens > 0 and job.completion_tokens > 0
    assert job.n_errors == mine.filter(outcome=JudgeVerdict.Outcome.ERROR).count()
