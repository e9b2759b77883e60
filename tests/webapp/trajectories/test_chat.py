"""Chat trajectories (OpenAI-style messages with tool calls) in the web app: imported (file, API), scored, shown,
audited and exported exactly as tag trajectories are."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.webapp.factories import RunFactory
from webapp.audits.report import audit_report
from webapp.audits.services import audit_create, label_save
from webapp.common.importing import DataImportError
from webapp.trajectories.models import JudgeVerdict, Step, Trajectory
from webapp.trajectories.services import trajectory_import

pytestmark = pytest.mark.django_db


def messages(answer: str = "<answer>Paris</answer>") -> list[dict]:
    return [
        {"role": "system", "content": "Answer; call search when you need facts."},
        {"role": "user", "content": "What is the capital of France?"},
        {
            "role": "assistant",
            "content": "I will check.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "capital of France"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "Doc 1 (Title: Paris) Paris is the capital of France.",
        },
        {"role": "assistant", "content": f"The document says so. {answer}"},
    ]


def line(**extra) -> dict:
    return {"golds": ["Paris"], "messages": messages(), **extra}


def write(path, lines) -> str:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return str(path)


VERDICTS = [
    {"detector": "over_search", "step": 0, "outcome": "true", "judge_model": "judge-a"},
    {"detector": "under_search", "step": 1, "outcome": "false", "judge_model": "judge-a"},
]


def test_a_chat_line_is_stored_as_steps_and_scored_by_its_method(tmp_path):
    run = RunFactory()
    path = write(tmp_path / "chat.jsonl", [line(method="hiprag", verdicts=VERDICTS, step=3)])
    assert trajectory_import(path=path, run_id=run.pk) == 1
    trajectory = Trajectory.objects.get()
    assert (trajectory.format, trajectory.format_ok, trajectory.final_answer) == ("chat", True, "Paris")
    assert trajectory.question_text == "What is the capital of France?"  # the first user message
    assert (trajectory.n_steps, trajectory.n_searches, trajectory.exact_match) == (2, 1, True)
    search, answer = trajectory.steps.order_by("index")
    assert (search.kind, search.query, search.reasoning) == ("search", "capital of France", "I will check.")
    assert search.context.startswith("Doc 1 (Title: Paris)")
    assert (answer.kind, answer.conclusion) == ("non_search", "Paris")
    # HiPRAG Eq. 1, A = F = 1: 1 + λp·N_corr/N = 1 + 0.4·1/2 (the search step was judged over-search)
    assert trajectory.total_reward == pytest.approx(1.2)
    assert JudgeVerdict.objects.filter(trajectory=trajectory, step__isnull=False).count() == 2


def test_an_agents_bad_tool_call_is_stored_as_an_invalid_trajectory_with_its_reason(tmp_path):
    broken = messages()
    broken[2]["tool_calls"][0]["function"]["arguments"] = '{"query": capital'
    path = write(tmp_path / "chat.jsonl", [line(messages=broken, question="Capital?")])
    trajectory_import(path=path)
    trajectory = Trajectory.objects.get()
    assert not trajectory.format_ok
    assert trajectory.format_error == "messages[2].tool_calls[0].function.arguments: not JSON"
    assert trajectory.raw_text[trajectory.format_error_position :].startswith('{"role": "assistant"')


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (lambda x: x["messages"][1].update(role="human"), "messages[1].role", "expected one of"),
        (lambda x: x["messages"][3].update(tool_call_id="call_9"), "messages[3].tool_call_id", "call_9"),
        (lambda x: x.update(messages="hi"), "messages", "expected a list"),
        (lambda x: x.pop("golds"), "golden_answers", "missing"),
        (lambda x: x.update(response="<answer>x</answer>"), "response", "not both"),
        (lambda x: x.update(search_tools="search"), "search_tools", "list of tool names"),
        (lambda x: x.update(method="autosearch"), "method", "does not apply to chat trajectories"),
        (lambda x: x.update(method="hiprag"), "verdicts", "needs a judge outcome"),
    ],
)
def test_a_bad_chat_line_names_file_line_and_field_and_stores_nothing(tmp_path, edit, field, message):
    bad = line()
    edit(bad)
    path = write(tmp_path / "chat.jsonl", [line(), bad])
    with pytest.raises(DataImportError) as caught:
        trajectory_import(path=path, display_name="chat.jsonl")
    assert (caught.value.file, caught.value.line, caught.value.field) == ("chat.jsonl", 2, field)
    assert message in caught.value.message
    assert not Trajectory.objects.exists() and not Step.objects.exists()


def test_the_api_imports_a_chat_file_and_answers_400_naming_the_line(api_client):
    run = RunFactory()
    body = (json.dumps(line(method="search_r1")) + "\n").encode()
    upload = SimpleUploadedFile("rollouts.jsonl", body)
    response = api_client.post(
        "/api/v1/trajectories/import/", {"file": upload, "run": run.pk}, format="multipart"
    )
    assert response.status_code == 201, response.content
    assert response.json() == {"imported": 1}
    stored = Trajectory.objects.get(run=run)
    assert (stored.format, stored.total_reward) == ("chat", 1.0)  # Search-R1 v0.3: right answer, valid format
    bad = SimpleUploadedFile("bad.jsonl", body + b'{"golds": ["x"], "messages": [{"role": "x"}]}\n')
    response = api_client.post("/api/v1/trajectories/import/", {"file": bad}, format="multipart")
    assert response.status_code == 400
    assert response.json() | {"detail": ""} == {
        "file": "bad.jsonl",
        "line": 2,
        "field": "messages[0].role",
        "detail": "",
    }
    assert Trajectory.objects.count() == 1


def test_the_page_shows_the_tool_call_its_query_and_its_result(client, researcher, tmp_path):
    other = messages()
    other[2]["tool_calls"].append(
        {"id": "call_2", "type": "function", "function": {"name": "calculator", "arguments": '{"x": "2+2"}'}}
    )
    other.insert(4, {"role": "tool", "tool_call_id": "call_2", "content": "4"})
    trajectory_import(path=write(tmp_path / "chat.jsonl", [line(messages=other, verdicts=VERDICTS)]))
    client.force_login(researcher)
    page = client.get(f"/trajectories/{Trajectory.objects.get().pk}/").content.decode()
    assert "tool call</span> <code>search</code>" in page
    assert "query</span> <code>capital of France</code>" in page
    assert "Paris is the capital of France." in page
    assert (
        "<code>calculator</code> <code>{&quot;x&quot;: &quot;2+2&quot;}</code>" in page
        and "tool result" in page
    )
    assert "over_search: true" in page


def test_audits_and_step_reward_exports_work_unchanged_on_chat_trajectories(
    tmp_path, annotator_client, researcher, annotator, api_client
):
    run = RunFactory()
    lines = [line(step=1, step_rewards=[0.25, 0.5], verdicts=VERDICTS) for _ in range(3)]
    trajectory_import(path=write(tmp_path / "chat.jsonl", lines), run_id=run.pk)
    audit = audit_create(name="chat", run_ids=[run.pk], sample_size=3, seed=1, annotators=[annotator])
    for item in audit.items.all():
        search, answer = item.trajectory.steps.order_by("index")
        label_save(item=item, annotator=annotator, step_id=search.pk, label="necessary")
        label_save(item=item, annotator=annotator, step_id=answer.pk, label="correct")
    # the annotator's workspace shows a chat trajectory's steps as any other's (blind: no verdicts)
    page = annotator_client.get(f"/audits/queue/items/{audit.items.first().pk}/").content.decode()
    assert "capital of France" in page and "over_search" not in page
    report = audit_report(audit=audit)
    over = next(s for s in report.sections if s.detector.name == "over_search")
    under = next(s for s in report.sections if s.detector.name == "under_search")
    # the judge said over-search on every search step, the annotator "necessary": 0 of 3 agree; under-search 3 of 3
    assert (over.n_labelled, over.agreement.percent_agreement) == (3, 0.0)
    assert (under.n_labelled, under.agreement.percent_agreement) == (3, 1.0)
    api_client.force_authenticate(researcher)
    rows = [
        json.loads(x)
        for x in b"".join(
            api_client.get(f"/api/v1/runs/{run.pk}/step-rewards.jsonl").streaming_content
        ).splitlines()
    ]
    assert [(r["step_index"], r["kind"], r["query"], r["reward"]) for r in rows] == [
        (0, "search", "capital of France", 0.25),
        (1, "non_search", None, 0.5),
    ] * 3
    response = api_client.get(f"/api/v1/runs/{run.pk}/step-rewards.csv", HTTP_ACCEPT="text/csv")
    table = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["kind"], r["reward"]) for r in table[:2]] == [("search", "0.25"), ("non_search", "0.5")]


def test_the_score_api_scores_chat_messages_and_refuses_what_does_not_apply(api_client):
    item = {"messages": messages(), "golden_answers": ["Paris"], "judgements": {"step_flags": [False, False]}}
    response = api_client.post("/api/v1/score", {"method": "hiprag", "trajectories": [item]}, format="json")
    assert response.status_code == 200, response.content
    (result,) = response.json()["results"]
    # HiPRAG Eq. 1 with A = F = 1 and both steps optimal: 1 + λp = 1.4
    assert result["total"] == pytest.approx(1.4)
    assert result["parsed"] | {"format_error": None} == {
        "format": "chat",
        "format_ok": True,
        "format_error": None,
        "answer": "Paris",
        "n_steps": 2,
        "n_searches": 1,
    }
    refused = api_client.post("/api/v1/score", {"method": "search_p1", "trajectories": [item]}, format="json")
    (error,) = refused.json()["results"]
    assert error["error"]["field"] == "method" and "does not apply to chat" in error["error"]["message"]
    malformed = {**item, "messages": [{"role": "robot"}]}
    body = api_client.post(
        "/api/v1/score", {"method": "search_r1", "trajectories": [malformed]}, format="json"
    )
    assert body.json()["results"][0]["error"]["field"] == "messages[0].role"
    mixed = [item, {"response": "<answer>Paris</answer>", "golden_answers": ["Paris"]}]
    assert (
        api_client.post(
            "/api/v1/score", {"method": "hiprag", "trajectories": mixed}, format="json"
        ).status_code
        == 400
    )
