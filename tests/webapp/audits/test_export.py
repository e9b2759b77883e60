"""The export: enough to recompute the report outside searchlab, as JSONL (everything) or CSV (per table)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.webapp.audits.conftest import EVIDENCE, LLM
from webapp.audits.services import adjudication_save, audit_transition

pytestmark = pytest.mark.django_db


@pytest.fixture
def adjudicated(small_audit, annotator, bob, researcher):
    small_audit.label(annotator, 0, "necessary", "new query")
    small_audit.label(bob, 0, "unnecessary")
    for number, value in ((1, "correct"), (2, "necessary"), (3, "incorrect")):
        small_audit.label(annotator, number, value)
        small_audit.label(bob, number, value)
    adjudication_save(
        audit=small_audit.audit, step_id=small_audit.steps[0].pk, label="unnecessary", adjudicator=researcher
    )
    return small_audit


def records(body: bytes) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for line in body.decode().splitlines():
        row = json.loads(line)
        found.setdefault(row.pop("record"), []).append(row)
    return found


def recompute_accuracy(found: dict[str, list[dict]], detector: str, judge_model: str) -> float:
    """What someone outside searchlab does with the export: human answer = adjudication, else the majority."""
    answers: dict[int, list[bool]] = {}
    for row in found["label"]:
        if row["answer"] is not None:
            answers.setdefault(row["step_id"], []).append(row["answer"])
    human = {step: sum(a) * 2 > len(a) for step, a in answers.items() if sum(a) * 2 != len(a)}
    human.update({row["step_id"]: row["answer"] for row in found["adjudication"]})
    pairs = [
        (row["outcome"] == "true", human[row["step_id"]])
        for row in found["verdict"]
        if row["detector"] == detector and row["judge_model"] == judge_model and row["step_id"] in human
    ]
    return sum(judge == truth for judge, truth in pairs) / len(pairs)


def test_the_jsonl_export_reproduces_the_report(researcher_client, adjudicated):
    response = researcher_client.get(f"/audits/{adjudicated.audit.pk}/export.jsonl")
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="audit-{adjudicated.audit.pk}.jsonl"'
    found = records(response.content)
    (settings,) = found["audit"]
    assert (settings["seed"], settings["annotators_per_item"], settings["annotators"]) == (
        11,
        2,
        ["ann", "bob"],
    )
    assert settings["frozen_report_id"] is None and "random.Random(seed)" in settings["sampling"]
    assert [row["position"] for row in found["item"]] == [0, 1]
    assert len(found["label"]) == 8 and len(found["verdict"]) == 8
    (adjudication,) = found["adjudication"]
    assert (adjudication["label"], adjudication["answer"], adjudication["adjudicator"]) == (
        "unnecessary",
        True,
        "rey",
    )
    (report,) = found["report"]
    assert report["n_adjudicated"] == 1
    for section in report["detectors"]:
        expected = recompute_accuracy(found, section["detector"], section["judge_model"])
        assert section["percent_agreement"]["value"] == pytest.approx(expected), section["judge_model"]


def test_the_csv_tables(researcher_client, adjudicated):
    audit = adjudicated.audit
    labels = list(
        csv.DictReader(
            io.StringIO(researcher_client.get(f"/audits/{audit.pk}/export/labels.csv").content.decode())
        )
    )
    assert len(labels) == 8
    assert {key: labels[0][key] for key in ("annotator", "label", "answer", "comment")} == {
        "annotator": "ann",
        "label": "necessary",
        "answer": "False",
        "comment": "new query",
    }
    report = list(
        csv.DictReader(
            io.StringIO(researcher_client.get(f"/audits/{audit.pk}/export/report.csv").content.decode())
        )
    )
    assert [(row["detector"], row["judge_model"]) for row in report] == [
        ("over_search", EVIDENCE),
        ("over_search", LLM),
        ("under_search", EVIDENCE),
        ("under_search", LLM),
    ]
    settings = next(
        csv.DictReader(
            io.StringIO(researcher_client.get(f"/audits/{audit.pk}/export/settings.csv").content.decode())
        )
    )
    assert (settings["seed"], settings["annotators"]) == ("11", "ann bob")
    assert researcher_client.get(f"/audits/{audit.pk}/export/secrets.csv").status_code == 404


def test_an_empty_table_still_names_its_columns(researcher_client, small_audit):
    body = researcher_client.get(f"/audits/{small_audit.audit.pk}/export/adjudications.csv").content.decode()
    assert (
        body.strip()
        == "trajectory_id,step_id,step_index,step_kind,label,answer,comment,adjudicator,updated_at"
    )


def test_a_closed_audit_exports_its_frozen_report(api_client, adjudicated, researcher):
    frozen = audit_transition(audit=adjudicated.audit, action="close", by=researcher)
    response = api_client.get(f"/api/v1/audits/{adjudicated.audit.pk}/export.jsonl")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/jsonl")
    found = records(response.content)
    assert found["audit"][0]["frozen_report_id"] == frozen.pk
    assert found["report"][0]["frozen_report_id"] == frozen.pk
    assert found["report"][0]["detectors"] == frozen.report["detectors"]
    response = api_client.get(f"/api/v1/audits/{adjudicated.audit.pk}/export/report.csv")
    assert response.status_code == 200 and f",{frozen.pk}\r\n".encode() in response.content


def test_annotators_cannot_export(annotator_client, small_audit):
    assert annotator_client.get(f"/audits/{small_audit.audit.pk}/export.jsonl").status_code == 403


def test_the_export_api_is_in_the_schema(api_client):
    paths = api_client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    for path in (
        "/api/v1/audits/{audit_id}/export.jsonl",
        "/api/v1/audits/{audit_id}/export/{table}.csv",
        "/api/v1/audits/{audit_id}/status/",
        "/api/v1/audits/reports/{report_id}/",
    ):
        assert path in paths
