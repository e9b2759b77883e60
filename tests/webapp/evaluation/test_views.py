"""The evaluation pages: new-evaluation form, report page and fragment, and the compare page on the demo runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.agent.conftest import ScriptedServer
from tests.webapp.evaluation.conftest import spec_for
from webapp.demo.services import demo_seed
from webapp.evaluation.services import evaluation_run_create, evaluation_run_execute
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def test_it_shows_field_errors_on_the_new_evaluation_form(researcher_client: Any, datasets: Any) -> None:
    response = researcher_client.post(
        "/evaluation/new/",
        {"method": "hiprag", "model": "/no/such/folder", "judge": "openai", "params": "{oops", "limit": "0"},
    )
    assert response.status_code == 400
    assert "evaluation/new.html" in [t.name for t in response.templates]
    errors = response.context["form"].errors
    assert set(errors) >= {"datasets", "params", "limit"}
    assert "not JSON" in errors["params"][0]
    assert 'id="id_datasets_errors"' in response.content.decode()


def test_it_checks_the_spec_once_the_fields_are_valid(
    researcher_client: Any, datasets: Any, tmp_path: Path
) -> None:
    data = {"method": "hiprag", "model": str(tmp_path), "datasets": [datasets[0].pk], "judge": "none"}
    response = researcher_client.post("/evaluation/new/", data)
    assert response.status_code == 400
    assert response.context["form"].errors["index"] == [
        "choose an index or give a /retrieve URL (one of the two)"
    ]

    with mock.patch("webapp.evaluation.tasks.evaluation_run_task.delay"):
        response = researcher_client.post("/evaluation/new/", {**data, "retrieve_url": "http://r:8000"})
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.config["retrieve_url"] == "http://r:8000" and run.created_by.username == "rey"
    assert run.config["backend"] == "transformers"  # the form's default local engine

    with mock.patch("webapp.evaluation.tasks.evaluation_run_task.delay"):
        researcher_client.post(
            "/evaluation/new/", {**data, "retrieve_url": "http://r:8000", "engine": "vllm"}
        )
    assert Run.objects.latest("pk").config["backend"] == "vllm"


def test_it_renders_the_report_page_and_fragment(
    researcher_client: Any, tmp_path: Path, datasets: Any, judge_server: ScriptedServer, fake_components: Any
) -> None:
    spec = spec_for(tmp_path, (datasets[0].pk, datasets[1].pk), judge_server.base_url)
    run = evaluation_run_execute(run_id=evaluation_run_create(user=None, spec=spec, enqueue=False).pk)

    response = researcher_client.get(f"/evaluation/runs/{run.pk}/report/")
    assert response.status_code == 200
    assert "evaluation/_report.html" in [t.name for t in response.templates]
    html = response.content.decode()
    assert '<td title="every trajectory pooled (HiPRAG Table 4&#x27;s Avg.)">All (pooled)</td>' in html
    assert "<code>judge-m</code>" in html

    fragment = researcher_client.get(f"/evaluation/runs/{run.pk}/report/fragment/")
    assert fragment.status_code == 200 and b"hx-trigger" not in fragment.content  # finished: no polling
    index = researcher_client.get("/evaluation/")
    assert index.status_code == 200 and f"/evaluation/runs/{run.pk}/report/" in index.content.decode()


@pytest.fixture
def demo_runs(db: Any) -> tuple[Run, Run]:
    demo_seed()
    return Run.objects.get(name="Search-R1 baseline (demo)"), Run.objects.get(name="HiPRAG (demo)")


def test_it_compares_a_run_with_its_baseline_by_question(researcher_client: Any, demo_runs: Any) -> None:
    baseline, hiprag = demo_runs
    response = researcher_client.get(f"/compare/?b={hiprag.pk}")  # A defaults to B's baseline

    assert response.status_code == 200
    assert "evaluation/compare.html" in [t.name for t in response.templates]
    context = response.context
    assert context["run_a"] == baseline and context["n_questions"] == 12
    counts = {key: n for key, _, n in context["bucket_tabs"]}
    assert sum(counts.values()) == 12 and counts["unpaired"] == 0
    assert context["summary_a"].average_searches > context["summary_b"].average_searches


def test_it_filters_a_bucket_and_shows_the_steps_side_by_side(researcher_client: Any, demo_runs: Any) -> None:
    baseline, hiprag = demo_runs
    base = f"/compare/?a={baseline.pk}&b={hiprag.pk}"
    everything = researcher_client.get(base).context
    bucket = next(key for key, _, n in everything["bucket_tabs"] if n)
    response = researcher_client.get(f"{base}&bucket={bucket}")
    shown = list(response.context["page"])
    assert shown and all(q.bucket == bucket for q in shown)

    chosen = shown[0]
    response = researcher_client.get(f"{base}&bucket={bucket}&q={chosen.key}")
    pair = response.context["pair"]
    assert pair.a.pk == chosen.a.trajectory_id and pair.b.pk == chosen.b.trajectory_id
    assert len(pair.steps) == max(pair.a.n_steps, pair.b.n_steps)
    html = response.content.decode()
    assert html.count('<div class="pair-head">') == 2 and "<summary>retrieved context</summary>" in html


def test_it_refuses_to_compare_a_run_with_itself(researcher_client: Any, demo_runs: Any) -> None:
    _, hiprag = demo_runs
    response = researcher_client.get(f"/compare/?a={hiprag.pk}&b={hiprag.pk}")
    assert response.status_code == 200 and "choose a different run from A" in response.content.decode()


def test_an_imported_evaluation_run_shows_its_report_and_no_training_sections(
    researcher_client: Any, demo_runs: Any
) -> None:
    from webapp.evaluation.models import EvaluationReport

    _, hiprag = demo_runs
    page = researcher_client.get(f"/runs/{hiprag.pk}/").content.decode()
    assert "<h2>Curves</h2>" not in page and "Latest metrics" not in page
    assert page.index('id="evaluation-report"') < page.index("<h2>Newest trajectories</h2>")

    fragment = researcher_client.get(f"/evaluation/runs/{hiprag.pk}/report/fragment/").content.decode()
    assert "This run has no report" not in fragment
    pooled = EvaluationReport.objects.get(run=hiprag, dataset="overall").row
    assert pooled["n_trajectories"] == 12 and pooled["osr"] is not None  # the team's step verdicts are read
    assert researcher_client.get(f"/evaluation/runs/{hiprag.pk}/report/").status_code == 200
    assert EvaluationReport.objects.filter(run=hiprag, dataset="overall").count() == 1  # computed once
