"""FlashRAG's acc beside CEM in the web app: the stored report, its API, the report page and the compare page."""

from __future__ import annotations

from typing import Any

from webapp.evaluation.services import evaluation_report_ensure
from webapp.runs.models import Run
from webapp.trajectories.models import Trajectory

# (answer, gold, acc, CEM): issue 33 item 5's examples
ANSWERS = (
    ("U.S.A.", "USA", True, False),
    ("AC/DC", "ACDC", True, False),
    ("Jay Z", "Jay-Z", False, True),
    ("Paris", "Paris", True, True),
)


def _run(name: str, answers: tuple[tuple[str, str, bool, bool], ...]) -> Run:
    run = Run.objects.create(name=name, kind="eval", method="search_r1", status="finished")
    Trajectory.objects.bulk_create(
        Trajectory(
            run=run,
            question_text=f"question {i}",
            golden_answers=[gold],
            format="search_r1",
            raw_text=f"<answer>{answer}</answer>",
            format_ok=True,
            final_answer=answer,
            exact_match=False,
            cover_exact_match=cem,
            f1=0.0,
        )
        for i, (answer, gold, _, cem) in enumerate(answers)
    )
    return run


def test_it_stores_and_serves_acc_beside_cem(db: Any, api_client: Any, researcher_client: Any) -> None:
    run = _run("acc", ANSWERS)
    assert evaluation_report_ensure(run_id=run.pk)

    body = api_client.get(f"/api/v1/runs/{run.pk}/report/").json()
    pooled = next(row for row in body["rows"] if row["dataset"] == "overall")
    assert (pooled["acc"], pooled["cem"]) == (0.75, 0.5)

    html = researcher_client.get(f"/evaluation/runs/{run.pk}/report/").content.decode()
    assert html.index(">CEM</th>") < html.index(">acc (FlashRAG)</th>") < html.index(">EM</th>")
    assert ">75.0</td>" in html and ">50.0</td>" in html


def test_it_compares_runs_by_acc_and_pairs_its_difference(db: Any, researcher_client: Any) -> None:
    baseline = _run("base", tuple(("nobody", gold, False, False) for _, gold, _, _ in ANSWERS))
    # the same questions (by text), answered as ANSWERS: acc right on 3, CEM on 2
    method = _run("method", ANSWERS)
    extra = _run("extra", ANSWERS)

    response = researcher_client.get(f"/compare/?a={baseline.pk}&b={method.pk}&metric=acc")
    two = response.context
    assert (two["summary_a"].accuracy, two["summary_b"].accuracy) == (0.0, 0.75)
    assert "<th>accuracy (acc (FlashRAG))</th>" in response.content.decode()
    cem = researcher_client.get(f"/compare/?a={baseline.pk}&b={method.pk}&metric=cem").context
    assert cem["summary_b"].accuracy == 0.5

    many = researcher_client.get(f"/compare/?a={baseline.pk}&b={method.pk}&runs={extra.pk}")
    context = many.context
    assert context["difference_titles"][:3] == ["ΔCEM", "Δacc (FlashRAG)", "ΔEM"]
    row = next(r for r in context["many_runs"] if r["run"].pk == method.pk)
    by_metric = {d["metric"]: d["cell"] for d in row["differences"]}
    assert (by_metric["acc"], by_metric["cem"]) == ("+75.0", "+50.0")
