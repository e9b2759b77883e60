"""`manage.py evaluate` prints the papers' table; GET /api/v1/runs/<id>/report/ returns the stored rows."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.agent.conftest import ScriptedServer
from tests.webapp.evaluation.conftest import spec_for
from webapp.evaluation.services import evaluation_run_create, evaluation_run_execute
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def test_it_runs_an_evaluation_from_the_command_line_and_prints_the_table(
    tmp_path: Path, datasets: Any, judge_server: ScriptedServer, fake_components: Any
) -> None:
    out, err = StringIO(), StringIO()
    call_command(
        "evaluate",
        *("--model", str(tmp_path), "--dataset", "nq", "--dataset", "hotpotqa", "--method", "hiprag"),
        *(
            "--retrieve-url",
            "http://127.0.0.1:9",
            "--judge",
            judge_server.base_url,
            "--judge-model",
            "judge-m",
        ),
        *("--limit", "1"),
        stdout=out,
        stderr=err,
    )
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:8] == ["Dataset", "N", "CEM", "acc", "(FlashRAG)", "EM", "F1", "OSR"]
    rows = {line.split()[0]: line.split() for line in lines[2:] if not line.startswith("-")}
    assert set(rows) == {"hotpotqa", "nq", "Avg.", "All"}
    assert rows["nq"][1:7] == ["1", "100.0", "100.0", "100.0", "100.0", "100.0"]  # N, CEM, acc, EM, F1, OSR
    assert rows["nq"][7] == "—"  # USR: every under-search call failed, so it is undefined, not 0
    assert "judge judge-m: " in err.getvalue() and Run.objects.get().status == "finished"


def test_it_names_the_option_at_fault(tmp_path: Path, datasets: Any) -> None:
    with pytest.raises(CommandError, match="--dataset: no dataset named 'squad'"):
        call_command("evaluate", "--model", str(tmp_path), "--dataset", "squad", "--index", "1")
    with pytest.raises(
        CommandError, match=r"--judge: none, policy, evidence, reask, openai, or an http\(s\)://"
    ):
        call_command(
            "evaluate", "--model", str(tmp_path), "--dataset", "nq", "--index", "1", "--judge", "ftp://x"
        )


def test_it_serves_the_report_in_the_api(
    tmp_path: Path, datasets: Any, judge_server: ScriptedServer, fake_components: Any, api_client: Any
) -> None:
    nq, _ = datasets
    run = evaluation_run_create(
        user=None, spec=spec_for(tmp_path, (nq.pk,), judge_server.base_url), enqueue=False
    )
    evaluation_run_execute(run_id=run.pk)

    response = api_client.get(f"/api/v1/runs/{run.pk}/report/")

    assert response.status_code == 200
    body = response.json()
    assert [row["dataset"] for row in body["rows"]] == ["nq", "average", "overall"]
    nq_row = body["rows"][0]
    assert nq_row["cem"] == 1.0 and nq_row["osr"] == 1.0 and nq_row["usr"] is None
    assert nq_row["search_depth"] == nq_row["average_searches"] == 1.0
    assert body["n_trajectories"] == 2 and body["n_judge_errors"] == 2
    assert body["judge_stats"]["judge-m"]["errors"] == 1  # the two identical failing calls shared one request
    assert api_client.get("/api/v1/runs/999999/report/").status_code == 404


def test_it_documents_the_report_in_the_openapi_schema(api_client: Any) -> None:
    schema = api_client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/runs/{run_id}/report/"]["get"]
    assert operation["operationId"] == "runs_report"
    assert "osr" in schema["components"]["schemas"]["EvaluationReportRow"]["properties"]
