"""Reporting that nothing breaks (issue 32): each row checked on its own, refused rows answered and dead-lettered by
the real client, a 5-minute outage ridden out by the spool, tokens that expire and can be revoked, a quiet run that
is not crashed, and Stop reaching a trainer that reports over HTTP."""

from __future__ import annotations

import datetime as dt
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.core import signing
from django.utils import timezone

from tests.bench_scripts import bench_script
from tests.webapp.training.conftest import FAKE_TRAINER
from tests.webapp.training.live import RestartableServer
from trainer.report_client import (
    IngestRejected,
    OutputTailer,
    ReportClient,
    ServerError,
    report_while_running,
)
from webapp.runs.models import MetricPoint, Run
from webapp.runs.services import run_create, run_mark_finished, run_mark_started
from webapp.training import ingest, reporting
from webapp.training.ingest_rows import RowError, check_metric
from webapp.training.models import IngestedSample, TrainingProcess
from webapp.training.services import training_mark_crashed
from webapp.trajectories.models import Trajectory

faults = bench_script("ingest_faults")


def _external_run(**config: Any) -> Run:
    run = run_create(
        name="remote",
        method="hiprag",
        model_name="tiny-random",
        kind=Run.Kind.TRAIN,
        algorithm="grpo",
        config={"executor": "external", **config},
    )
    return run_mark_started(run_id=run.pk)


def _post(client: Any, run: Run, body: Any, token: str | None = None) -> Any:
    return client.post(
        f"/api/v1/runs/{run.pk}/ingest/",
        body if isinstance(body, str) else json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token or ingest.ingest_token(run.pk)}",
    )


# --- the fault test: the real client, its spool, HTTP, every bad case and a 5-minute outage --------------------


@pytest.mark.django_db(transaction=True)
def test_every_bad_case_and_a_5_minute_outage_lose_nothing(tmp_path, settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    run = _external_run()
    server = RestartableServer()
    server.start()
    try:
        figures = faults.fault_scenario(
            server.url, run.pk, ingest.ingest_token(run.pk), tmp_path, down=server.stop, up=server.start
        )
    finally:
        server.stop()
    print("\n" + "\n".join(figures.lines()))
    bad_cases = len(faults.BAD_METRICS) + len(faults.BAD_SAMPLES)
    assert figures.lost == 0 and figures.pending == 0
    assert (
        figures.stored == figures.valid == 8 * 3 + 10
    )  # 8 steps of 3 keys; 9 samples and the corrected resend
    assert MetricPoint.objects.filter(run=run).count() == 24
    assert Trajectory.objects.filter(run=run).count() == IngestedSample.objects.filter(run=run).count() == 10
    assert figures.refused == bad_cases and figures.duplicate == 1
    assert figures.written == figures.sent == figures.stored + figures.duplicate + figures.refused
    named = {reason.split(":", 1)[0] for reason in figures.reasons}
    for kind, cases in (("metrics", faults.BAD_METRICS), ("samples", faults.BAD_SAMPLES)):
        for what, _, field in cases:
            assert f"{kind}.{field or '(row)'}" in named, what
    assert figures.failed_requests > 0 and figures.unreachable_seconds >= 5 * 60  # a fake clock: no real wait
    assert figures.quiet == "quiet for 5 min" and not figures.crashed_during_outage
    assert figures.final_status == Run.Status.FINISHED
    assert figures.kept_first_value and figures.corrected_resend_stored
    assert len(Run.objects.get(pk=run.pk).log_tail.encode()) <= 64 * 1024


# --- row checks ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"step": 2**63}, "step"),
        ({"step": 10**20}, "step"),
        ({"step": True}, "step"),
        ({"time": 1e20}, "time"),
        ({"time": -1e13}, "time"),
        ({"time": "nan"}, "time"),
        ({"time": float("nan")}, "time"),
        ({"value": float("inf")}, "value"),
        ({"value": 10**400}, "value"),
        ({"value": [1]}, "value"),
        ({"key": "k" * 101}, "key"),
    ],
)
def test_a_bad_metric_value_is_named(changes, field):
    with pytest.raises(RowError) as caught:
        check_metric({"step": 1, "key": "k", "value": 1.0, "time": 1.0, **changes})
    assert caught.value.field == field


def test_a_valid_metric_is_normalised():
    assert check_metric({"step": 3.0, "key": "k", "value": 1, "time": 2}) == {
        "step": 3,
        "key": "k",
        "value": 1.0,
        "time": 2.0,
    }


# --- the endpoint ------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_partly_valid_batch_is_stored_and_its_refusals_answered(client):
    run = _external_run()
    sample = faults.sample_row(1, steps=[{"index": 0, "verdicts": ["true"]}])
    body = {
        "metrics": [faults.metric(1, "a"), faults.metric(2**63, "b"), faults.metric(2, "c", time=1e20)],
        "samples": [{"key": "good", "row": faults.sample_row(1)}, {"key": "bad", "row": sample}],
    }
    response = _post(client, run, body)
    assert response.status_code == 200
    answer = response.json()
    assert answer["metrics"] == 1 and answer["samples"] == 1 and answer["stop"] is False
    assert answer["refused"] == [
        {
            "kind": "metrics",
            "index": 1,
            "field": "step",
            "reason": "must be between 0 and 2147483647, got 9223372036854775808",
        },
        {
            "kind": "metrics",
            "index": 2,
            "field": "time",
            "reason": "must be Unix seconds between 0 and 32503680000, got 1e+20",
        },
        {
            "kind": "samples",
            "index": 1,
            "field": "row.steps[0].verdicts[0]",
            "reason": "must be a JSON object, got 'true'",
            "key": "bad",
        },
    ]
    # The refused sample took no key: its corrected resend is stored.
    assert not IngestedSample.objects.filter(run=run, key="bad").exists()
    again = _post(client, run, {"samples": [{"key": "bad", "row": faults.sample_row(1)}]}).json()
    assert again["samples"] == 1 and again["refused"] == []
    assert Trajectory.objects.filter(run=run).count() == 2


@pytest.mark.django_db
def test_a_parser_that_fails_costs_its_sample_only(client, monkeypatch):
    from scoring import formats

    real = formats.parse

    def parse(name: str, text: str) -> Any:
        if "boom" in text:
            raise RuntimeError("parser bug")
        return real(name, text)

    monkeypatch.setattr(formats, "parse", parse)
    run = _external_run()
    body = {
        "samples": [
            {"key": "a", "row": faults.sample_row(1, text="boom")},
            {"key": "b", "row": faults.sample_row(1)},
        ]
    }
    answer = _post(client, run, body).json()
    assert answer["samples"] == 1 and [(r["index"], r["field"]) for r in answer["refused"]] == [
        (0, "row.text")
    ]
    assert "parser bug" in answer["refused"][0]["reason"]


@pytest.mark.django_db
def test_a_sample_the_database_refuses_costs_that_sample_only(client, monkeypatch):
    from webapp.training import ingest_samples as ingest_module

    real = ingest_module.trajectory_bulk_create

    def bulk(*, items: Any) -> int:
        if any(item.question_text == "refused by the database" for item in items):
            raise ValueError("constraint failed")
        return real(items=items)

    monkeypatch.setattr(ingest_module, "trajectory_bulk_create", bulk)
    run = _external_run()
    rows = [
        faults.sample_row(1),
        faults.sample_row(1, question="refused by the database"),
        faults.sample_row(2),
    ]
    answer = _post(
        client, run, {"samples": [{"key": f"k{i}", "row": row} for i, row in enumerate(rows)]}
    ).json()
    assert answer["samples"] == 2
    assert [(r["index"], r["key"], r["field"]) for r in answer["refused"]] == [(1, "k1", "row")]
    assert set(IngestedSample.objects.filter(run=run).values_list("key", flat=True)) == {"k0", "k2"}
    assert Trajectory.objects.filter(run=run).count() == 2


@pytest.mark.django_db
def test_a_replay_never_overwrites_a_stored_metric(client):
    run = _external_run()
    _post(client, run, {"metrics": [faults.metric(1, "a", value=0.5)]})
    answer = _post(client, run, {"metrics": [faults.metric(1, "a", value=99.0)]}).json()
    assert answer["metrics"] == 0 and answer["metrics_duplicate"] == 1
    assert MetricPoint.objects.get(run=run, key="a").value == 0.5


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("[1, 2]", ""),
        ("{not json", ""),
        ({"metrics": {"step": 1}}, "metrics"),
        ({"samples": "x"}, "samples"),
        ("[" * 50_000 + "]" * 50_000, ""),  # nested 50,000 deep
    ],
)
def test_an_unusable_body_is_a_400_naming_the_field(client, body, field):
    run = _external_run()
    response = _post(client, run, body)
    assert response.status_code == 400
    # (nesting is answered by the request limits middleware, before the view)
    assert response.json().get("field", "") == field and response.json()["detail"]


@pytest.mark.django_db
def test_bad_extras_are_refused_and_the_log_tail_is_kept_to_its_last_64_kb(client):
    run = _external_run()
    tail = "\n".join(f"line {i:06d} " + "x" * 90 for i in range(5000))  # about 500 KB
    answer = _post(client, run, {"log_tail": tail, "progress": [1], "final": "done"}).json()
    assert {(r["kind"], r["field"]) for r in answer["refused"]} == {("batch", "progress"), ("batch", "final")}
    run.refresh_from_db()
    assert len(run.log_tail.encode()) <= 64 * 1024 and run.log_tail.endswith(tail[-200:])
    assert run.log_tail.startswith("line ") and run.status == Run.Status.RUNNING


# --- tokens: expiry, revocation, the run's state -----------------------------------------------------------------


@pytest.mark.django_db
def test_an_ended_run_refuses_writes(client):
    run = _external_run()
    token = ingest.ingest_token(run.pk)
    run_mark_finished(run_id=run.pk, status=Run.Status.FAILED, error="boom")
    response = _post(client, run, {"metrics": [faults.metric(1, "a")], "log_tail": "late"}, token)
    assert response.status_code == 409
    assert response.json()["ended"] == "failed" and response.json()["stop"] is True
    assert "has ended" in response.json()["detail"]
    assert not MetricPoint.objects.filter(run=run).exists() and Run.objects.get(pk=run.pk).log_tail == ""


@pytest.mark.django_db
def test_an_expired_token_is_refused(client, monkeypatch):
    run = _external_run()
    old = int(time.time()) - 31 * 24 * 3600
    monkeypatch.setattr(signing.TimestampSigner, "timestamp", lambda self: signing.b62_encode(old))
    token = ingest.ingest_token(run.pk)
    monkeypatch.undo()
    response = _post(client, run, {"heartbeat": True}, token)
    assert response.status_code == 401 and "expired" in response.json()["detail"]


@pytest.mark.django_db
def test_a_researcher_revokes_a_runs_tokens_from_the_api_and_the_page(client, api_client, researcher_client):
    run = _external_run()
    token = ingest.ingest_token(run.pk)
    assert _post(client, run, {"heartbeat": True}, token).status_code == 200
    assert api_client.post(f"/api/v1/runs/{run.pk}/ingest-token/revoke/").json()["generation"] == 1
    response = _post(client, run, {"heartbeat": True}, token)
    assert response.status_code == 401 and "revoked" in response.json()["detail"]
    fresh = api_client.post(f"/api/v1/runs/{run.pk}/ingest-token/").json()["token"]
    assert _post(client, run, {"heartbeat": True}, fresh).status_code == 200
    page = researcher_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="revoke-tokens"' in page
    answer = researcher_client.post(f"/training/runs/{run.pk}/ingest-tokens/revoke/")
    assert answer.status_code == 200 and "ingest tokens revoked" in answer.content.decode()
    assert _post(client, run, {"heartbeat": True}, fresh).status_code == 401


def test_the_anonymous_cannot_revoke(client, db):
    run = _external_run()
    assert client.post(f"/api/v1/runs/{run.pk}/ingest-token/revoke/").status_code in (401, 403)
    assert Run.objects.get(pk=run.pk).ingest_generation == 0


# --- quiet, not crashed --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_quiet_reported_run_is_quiet_until_the_limit_and_its_final_status_wins(client, researcher_client):
    run = _external_run()
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - dt.timedelta(minutes=3, seconds=5))
    assert training_mark_crashed() == []
    page = researcher_client.get(f"/runs/{run.pk}/status/").content.decode()
    assert "quiet for 3 min" in page and "status-running" in page
    later = timezone.now() + dt.timedelta(seconds=reporting.quiet_limit_seconds())
    assert training_mark_crashed(now=later) == [run.pk]
    run.refresh_from_db()
    assert run.status == Run.Status.CRASHED and run.error.startswith("quiet for 6 h")
    # The trainer comes back: its rows are taken, and its final status wins over the guessed crash.
    answer = _post(client, run, {"metrics": [faults.metric(9, "a")], "final": "finished"})
    assert answer.status_code == 200 and answer.json()["metrics"] == 1
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.error == ""
    assert _post(client, run, {"heartbeat": True}).status_code == 409  # ended for real now


@pytest.mark.django_db
def test_a_local_run_is_still_crashed_after_the_heartbeat_timeout(settings):
    run = run_create(name="local", method="hiprag", model_name="m", kind=Run.Kind.TRAIN, algorithm="grpo")
    run_mark_started(run_id=run.pk)
    TrainingProcess.objects.create(run=run, run_dir="/nowhere", hostname="elsewhere")
    later = timezone.now() + dt.timedelta(seconds=settings.TRAINING_HEARTBEAT_TIMEOUT_SECONDS + 5)
    assert training_mark_crashed(now=later) == [run.pk]


# --- Stop on a run that reports over HTTP ------------------------------------------------------------------------


def _sender(django_client: Any, run: Run, token: str, on_call: Any = None) -> Any:
    """ReportClient's sender through Django's test client (what ``_post`` does over HTTP)."""
    calls = {"n": 0}

    def send(batch: dict[str, Any]) -> Any:
        calls["n"] += 1
        if on_call:
            on_call(calls["n"])
        response = _post(django_client, run, batch, token)
        if response.status_code >= 500:
            raise ServerError(f"HTTP {response.status_code}", status=response.status_code)
        if response.status_code >= 400:
            raise IngestRejected(
                f"HTTP {response.status_code}", status=response.status_code, answer=response.json()
            )
        return response.json()

    return send


@pytest.mark.django_db
def test_stop_on_a_reported_run_ends_it(client, researcher_client, tmp_path):
    run = _external_run()
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"output_dir": str(folder / "output")}))

    def press_stop(call: int) -> None:
        if call == 3:  # the run is reporting: a researcher presses Stop on its page
            page = researcher_client.post(f"/runs/{run.pk}/cancel/").content.decode()
            assert "stop requested" in page

    report = ReportClient(
        "http://unused",
        run.pk,
        "t",
        folder / "spool",
        sender=_sender(client, run, ingest.ingest_token(run.pk), press_stop),
    )
    command = [
        sys.executable,
        str(FAKE_TRAINER),
        str(folder / "config.json"),
        "--steps",
        "400",
        "--sleep",
        "0.05",
    ]
    started = time.monotonic()
    exit_code = report_while_running(
        command,
        report,
        OutputTailer(folder / "output", log_path=folder / "trainer.log"),
        log_path=folder / "trainer.log",
        interval=0.1,
        drain_seconds=10,
        heartbeat_seconds=0.1,
        echo=False,
    )
    assert time.monotonic() - started < 15  # 400 steps would take 20 s
    assert report.stop_requested and exit_code == 128 + signal.SIGINT
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.stop_requested_at is not None and run.error == ""
    steps = {row.step for row in MetricPoint.objects.filter(run=run)}
    assert 0 < max(steps) < 400
    assert (
        f"status-{Run.Status.CANCELLED}" in researcher_client.get(f"/runs/{run.pk}/status/").content.decode()
    )


@pytest.mark.django_db
def test_stop_on_a_ray_run_without_its_supervisor_stops_the_job_through_ray(
    researcher_client, monkeypatch, django_capture_on_commit_callbacks
):
    from webapp.training import executors

    run = run_create(name="ray", method="hiprag", model_name="m", kind=Run.Kind.TRAIN, algorithm="grpo")
    run_mark_started(run_id=run.pk)
    TrainingProcess.objects.create(
        run=run, run_dir="/x", executor="ray", job_id="searchlab-run-1-ab", hostname="gone"
    )
    stopped: list[str] = []

    class FakeJobs:
        def stop_job(self, job_id: str) -> bool:
            stopped.append(job_id)
            return True

    monkeypatch.setattr(executors, "job_client", lambda: FakeJobs())
    with django_capture_on_commit_callbacks(execute=True):
        page = researcher_client.post(f"/runs/{run.pk}/cancel/").content.decode()
    assert stopped == ["searchlab-run-1-ab"] and "stop" in page
    assert Run.objects.get(pk=run.pk).stop_requested_at is not None


# --- the client: never retries a 4xx, never blocks on one batch, drops nothing silently ------------------------


def _letters(client: ReportClient) -> list[dict[str, Any]]:
    return [json.loads(line) for line in client.dead_letter.read_text().splitlines()]


def test_a_4xx_is_never_retried_and_its_rows_are_dead_lettered(tmp_path):
    calls: list[int] = []

    def sender(batch: dict[str, Any]) -> Any:
        calls.append(len(batch["metrics"]))
        if batch["metrics"][0]["step"] == 1:
            raise IngestRejected("HTTP 400: metrics must be a list", status=400, answer={"field": "metrics"})
        return {"refused": [{"kind": "metrics", "index": 1, "field": "value", "reason": "must be a number"}]}

    client = ReportClient("http://x", 1, "t", tmp_path / "spool", sender=sender, sleep=lambda s: None)
    client.submit({"metrics": [{"step": 1}, {"step": 1}]})
    client.submit({"metrics": [{"step": 2}, {"step": 2, "value": "x"}]})
    assert client.flush() is True
    assert calls == [2, 2]  # one request each: the 400 was not retried
    letters = _letters(client)
    assert [(e["status"], e["field"], e["row"]) for e in letters] == [
        (400, "metrics", {"step": 1}),
        (400, "metrics", {"step": 1}),
        (200, "value", {"step": 2, "value": "x"}),
    ]
    assert client.rows_rejected == 2 and client.rows_refused == 1 and client.pending() == 0
    assert client.dead_letter == tmp_path / "spool.dead-letter.jsonl"


def test_a_batch_searchlab_fails_on_never_blocks_the_heartbeats_behind_it(tmp_path):
    delivered: list[dict[str, Any]] = []

    def sender(batch: dict[str, Any]) -> Any:
        if any(sample["row"].get("poison") for sample in batch.get("samples") or ()):
            raise ServerError("HTTP 500: boom", status=500)
        delivered.append(batch)
        return {"stop": len(delivered) >= 3}

    client = ReportClient("http://x", 1, "t", tmp_path / "spool", sender=sender, sleep=lambda s: None)
    client.submit(
        {"samples": [{"key": "p", "row": {"poison": True}}], "log_tail": "old tail", "heartbeat": True}
    )
    for beat in range(3):
        client.submit({"metrics": [{"step": beat}], "heartbeat": True})
        client.flush()
    assert [b["metrics"][0]["step"] for b in delivered] == [0, 1, 2]  # heartbeats got through every time
    assert client.pending() == 0 and client.rows_poisoned == 1 and client.stop_requested
    assert _letters(client)[0]["status"] == 500 and _letters(client)[0]["row"] == {
        "key": "p",
        "row": {"poison": True},
    }


def test_an_outage_answered_5xx_keeps_everything_spooled(tmp_path):
    def sender(batch: dict[str, Any]) -> Any:
        raise ServerError("HTTP 503", status=503)

    client = ReportClient("http://x", 1, "t", tmp_path / "spool", sender=sender, sleep=lambda s: None)
    for step in range(4):
        client.submit({"metrics": [{"step": step}]})
    for _ in range(5):
        assert client.flush() is False
    assert client.pending() == 4 and client.rows_dead_lettered == 0  # an outage: nothing given up


def test_rows_that_cannot_be_sent_go_to_the_dead_letter_file(tmp_path):
    output = tmp_path / "output"
    output.mkdir()
    rows = [
        {"step": 1, "key": "a", "value": 0.5, "time": 1.0},
        {"step": 1, "key": "kl", "value": float("nan"), "time": 1.0},
    ]
    (output / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    deep: Any = []
    for _ in range(100):
        deep = [deep]
    client = ReportClient("http://x", 1, "t", tmp_path / "spool", sender=lambda b: {})
    batch = OutputTailer(output).read()
    batch["samples"] = [{"key": "deep", "row": {"text": "x", "nested": deep}}]
    client.submit(batch)
    assert client.flush() and client.rows_acknowledged == 1 and client.rows_invalid == 2
    assert [(e["kind"], e["field"]) for e in _letters(client)] == [("metrics", "value"), ("samples", "")]


def test_a_409_tells_the_trainer_to_stop(tmp_path):
    def sender(batch: dict[str, Any]) -> Any:
        raise IngestRejected("HTTP 409", status=409, answer={"ended": "cancelled", "stop": True})

    client = ReportClient("http://x", 1, "t", Path(tmp_path) / "spool", sender=sender)
    client.submit({"heartbeat": True})
    assert client.flush() and client.stop_requested and client.run_ended == "cancelled"
