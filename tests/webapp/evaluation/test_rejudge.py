"""Re-judging a stored run: verdicts beside the old ones, progress, judge errors, retries, tokens and cost."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from tests.agent.conftest import Reply, ScriptedServer
from webapp.audits.correction import run_correction_context
from webapp.evaluation.models import JudgePrice, RejudgeJob
from webapp.evaluation.rejudge import rejudge_create, rejudge_execute
from webapp.evaluation.selectors import evaluation_report_rows
from webapp.evaluation.services import evaluation_report_ensure
from webapp.runs.models import Run
from webapp.trajectories.models import JudgeVerdict

pytestmark = pytest.mark.django_db


@pytest.fixture
def hiprag(db: Any) -> Run:
    from webapp.demo.services import demo_seed

    demo_seed()
    return Run.objects.get(name="HiPRAG (demo)")


@pytest.fixture
def server():
    found = ScriptedServer()
    yield found
    found.close()


def pooled(run: Run) -> dict[str, Any]:
    evaluation_report_ensure(run_id=run.pk)
    return next(row for row in evaluation_report_rows(run_id=run.pk) if row["dataset"] == "overall")


def test_an_evidence_rejudge_stores_its_verdicts_beside_the_runs_own(hiprag: Run) -> None:
    before = pooled(hiprag)
    n_before = JudgeVerdict.objects.filter(trajectory__run=hiprag).count()
    job = rejudge_create(run=hiprag, judge={"kind": "evidence"}, enqueue=False)
    assert job.version.name.startswith("evidence@") and job.n_trajectories == 12
    job = rejudge_execute(job_id=job.pk)
    assert job.status == RejudgeJob.Status.FINISHED and job.n_done == 12 and job.n_errors == 0
    n_steps = sum(t.n_steps for t in hiprag.trajectories.all())
    assert (
        job.n_verdicts == n_steps
    )  # one verdict per step: over-search on searches, under-search on the rest
    assert JudgeVerdict.objects.filter(trajectory__run=hiprag).count() == n_before + n_steps
    assert pooled(hiprag) == before  # the run's report still reads its own judge version
    context = run_correction_context(run_id=hiprag.pk)
    names = [c.version.name for c in context["corrections"]]
    assert names[0].startswith("imported·team-labels@") and job.version.name in names
    agreement = {(v.b.name, v.metric): v for v in context["version_agreements"]}
    osr = agreement[(job.version.name, "OSR")]
    assert osr.n_steps == 14 and osr.percent == 1.0  # the evidence judge and the team both flag nothing
    # A second delivery of the task does nothing; a second re-judge with the same judge adds no duplicate.
    assert rejudge_execute(job_id=job.pk).n_verdicts == n_steps
    again = rejudge_execute(job_id=rejudge_create(run=hiprag, judge={"kind": "evidence"}, enqueue=False).pk)
    assert again.status == RejudgeJob.Status.FINISHED
    assert JudgeVerdict.objects.filter(trajectory__run=hiprag).count() == n_before + n_steps


@pytest.mark.slow  # the demo's seed and a retried judge call through a local HTTP server: about 6 s
def test_an_endpoint_rejudge_records_errors_retries_tokens_and_cost(
    hiprag: Run, server: ScriptedServer
) -> None:
    def responder(body: dict[str, Any]) -> str | Reply:
        content = body["messages"][-1]["content"]
        if "Fact-Checker" in content:  # HiPRAG's Fig. 6 verifier: one step's call always fails
            return Reply(status=500) if "Marie Curie" in content else "<answer>True</answer>"
        if "semantically equivalent" in content:  # Fig. 5: equivalent = over-search
            return "<answer>True</answer>" if "Paris" in content else "<answer>False</answer>"
        return "I believe it is Paris."  # the re-ask of a query without retrieval

    server.responder = responder
    JudgePrice.objects.create(model="judge-x", input_per_million=2.0, output_per_million=8.0)
    judge = {"kind": "openai", "base_url": server.base_url, "model": "judge-x", "max_retries": 1}
    job = rejudge_execute(job_id=rejudge_create(run=hiprag, judge=judge, enqueue=False).pk)
    assert job.status == RejudgeJob.Status.FINISHED, job.error
    assert job.version.name.startswith("judge-x·hiprag-prompt@")
    mine = JudgeVerdict.objects.filter(version=job.version)
    errors = list(mine.filter(outcome="error"))
    assert len(errors) == job.n_errors == 1 and errors[0].raw_reply.startswith("error:")
    assert "Marie Curie" in errors[0].step.conclusion or "Marie Curie" in errors[0].step.reasoning
    assert job.n_retries == 1 and job.error_examples and job.n_verdicts == mine.count()
    assert mine.filter(detector="over_search", outcome="true").exists()
    assert job.prompt_tokens == 11 * (job.n_calls - 1) and job.completion_tokens == 3 * (job.n_calls - 1)
    from webapp.evaluation.rejudge_views import JobOutput

    body = JobOutput(job).data
    assert body["cost"] == pytest.approx((job.prompt_tokens * 2.0 + job.completion_tokens * 8.0) / 1e6)
    assert body["currency"] == "USD" and body["judge_version"] == job.version.name


def test_bad_requests_name_the_field(api_client: Any, hiprag: Run) -> None:
    with pytest.raises(ValidationError) as found:
        rejudge_create(run=hiprag, judge={"kind": "openai", "model": "m"}, enqueue=False)
    assert "base_url" in found.value.message_dict
    baseline = Run.objects.get(name="Search-R1 baseline (demo)")
    with pytest.raises(ValidationError) as found:
        rejudge_create(run=baseline, judge={"kind": "evidence"}, enqueue=False)
    assert "HiPRAG" in found.value.message_dict["run"][0]
    response = api_client.post(
        f"/api/v1/runs/{hiprag.pk}/rejudge/", {"judge": {"kind": "gpt"}}, format="json"
    )
    assert response.status_code == 400 and "kind" in response.json()


def test_the_run_page_offers_a_rejudge_for_a_finished_hiprag_run_but_not_a_warm_start(
    researcher_client: Any, hiprag: Run
) -> None:
    assert 'id="rejudge"' in researcher_client.get(f"/runs/{hiprag.pk}/").content.decode()
    warm = Run.objects.create(
        name="warm", kind=Run.Kind.WARM_START, algorithm=Run.Algorithm.SFT, method="hiprag",
        status=Run.Status.FINISHED, model_name="m",
    )  # fmt: skip
    page = researcher_client.get(f"/runs/{warm.pk}/")  # a warm start has no trajectories to judge
    assert page.status_code == 200 and 'id="rejudge"' not in page.content.decode()


def test_the_run_page_and_the_api_start_and_show_a_rejudge(
    researcher_client: Any, api_client: Any, hiprag: Run
) -> None:
    page = researcher_client.get(f"/evaluation/runs/{hiprag.pk}/rejudge/fragment/")
    assert page.status_code == 200 and b"Re-judge this run" in page.content
    created = api_client.post(
        f"/api/v1/runs/{hiprag.pk}/rejudge/", {"judge": {"kind": "evidence"}}, format="json"
    )
    assert created.status_code == 201, created.content
    job_id = created.json()["id"]
    rejudge_execute(job_id=job_id)  # the worker's part (the test settings queue tasks without running them)
    shown = api_client.get(f"/api/v1/rejudge/{job_id}/").json()
    assert shown["status"] == "finished" and shown["n_done"] == 12 and shown["cost"] is None
    posted = researcher_client.post(f"/evaluation/runs/{hiprag.pk}/rejudge/", {"kind": "openai"})
    assert posted.status_code == 400 and b"base URL" in posted.content
    assert (
        researcher_client.get(f"/evaluation/runs/{hiprag.pk}/rejudge/fragment/").content.count(
            b"<tr data-status"
        )
        == 1
    )
