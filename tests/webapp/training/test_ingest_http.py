"""Trainers reporting over HTTP (trainer.report_client → POST /api/v1/runs/<id>/ingest/): idempotent storage, the
run-scoped token, spooling and replay, and the fault test — searchlab unreachable for seconds mid-run, every row
stored exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.webapp.training.conftest import FAKE_TRAINER
from tests.webapp.training.live import RestartableServer
from trainer.report_client import OutputTailer, ReportClient, split_batch
from webapp.runs.models import MetricPoint, Run
from webapp.runs.services import run_create
from webapp.training import ingest
from webapp.training.models import IngestedSample
from webapp.trajectories.models import JudgeVerdict, Trajectory

REPO = Path(__file__).resolve().parents[3]


def _run() -> Run:
    return run_create(
        name="remote", method="hiprag", model_name="tiny-random", kind=Run.Kind.TRAIN, algorithm="grpo"
    )


def _fake_output(folder: Path, steps: int = 3, samples: int = 2) -> None:
    (folder / "config.json").write_text(json.dumps({"output_dir": str(folder / "output")}))
    command = [sys.executable, str(FAKE_TRAINER), str(folder / "config.json"), "--steps", str(steps)]
    subprocess.run([*command, "--sleep", "0", "--samples", str(samples)], check=True, capture_output=True)


@pytest.mark.django_db
def test_a_batch_stored_twice_is_stored_once(tmp_path):
    _fake_output(tmp_path, steps=3, samples=2)
    run = _run()
    batch = OutputTailer(tmp_path / "output").read()
    assert len(batch["metrics"]) == 12 and len(batch["samples"]) == 6  # NaN kl left out of the request

    first = ingest.store_batch(run_id=run.pk, batch=batch)
    second = ingest.store_batch(run_id=run.pk, batch=batch)

    assert len(batch["invalid"]) == 3 and {row["field"] for row in batch["invalid"]} == {"value"}
    assert first["metrics"] == 12 and first["samples"] == first["samples_new"] == 6
    assert first["samples_duplicate"] == 0 and first["refused"] == [] and first["stop"] is False
    assert (
        second["samples_new"] == 0 and second["samples_duplicate"] == 6 and second["metrics_duplicate"] == 12
    )
    assert MetricPoint.objects.filter(run=run).count() == 12
    assert Trajectory.objects.filter(run=run).count() == 6 == IngestedSample.objects.filter(run=run).count()
    assert JudgeVerdict.objects.filter(trajectory__run=run).count() == 12
    run.refresh_from_db()
    assert run.heartbeat_at is not None


@pytest.mark.django_db
def test_the_endpoint_takes_only_the_runs_own_token(client, tmp_path):
    run, other = _run(), _run()
    url = f"/api/v1/runs/{run.pk}/ingest/"
    batch = {"metrics": [{"step": 1, "key": "reward/mean", "value": 0.5, "time": 1.0}]}

    def post(token: str) -> int:
        response = client.post(
            url, batch, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        return response.status_code

    assert post("") == 401
    assert post(ingest.ingest_token(other.pk)) == 401
    assert post("forged") == 401
    assert post(ingest.ingest_token(run.pk)) == 200
    assert MetricPoint.objects.get(run=run).value == 0.5


@pytest.mark.django_db
def test_a_researcher_gets_a_runs_token(api_client):
    run = _run()
    response = api_client.post(f"/api/v1/runs/{run.pk}/ingest-token/")
    assert response.status_code == 200
    assert ingest.token_run_id(response.json()["token"]) == run.pk


def test_batches_are_split_with_the_heartbeat_on_the_last():
    batch = {
        "metrics": [{"n": i} for i in range(7)],
        "samples": [{"k": i} for i in range(4)],
        "progress": {"p": 1},
    }
    parts = split_batch(batch, limit=5)
    assert [len(p["metrics"]) + len(p["samples"]) for p in parts] == [5, 5, 1]
    assert "progress" in parts[-1] and all("progress" not in p for p in parts[:-1])
    big = {"samples": [{"key": str(i), "row": {"text": "x" * 400_000}} for i in range(5)]}
    assert [len(p["samples"]) for p in split_batch(big)] == [2, 2, 1]  # about 1 MB a request


def test_the_client_spools_while_searchlab_is_down_and_replays_in_order(tmp_path):
    delivered: list[dict] = []
    down = {"on": True}

    def sender(batch: dict) -> None:
        if down["on"]:
            raise ConnectionRefusedError("down")
        delivered.append(batch)

    client = ReportClient("http://x", 1, "t", tmp_path / "spool", sender=sender, sleep=lambda s: None)
    for step in range(3):
        client.submit({"metrics": [{"step": step}], "samples": []})
        assert client.flush() is False
    assert client.pending() == 3 and client.failed_requests == 9  # 3 tries each, then left spooled
    # A restarted client finds the spool and goes on from it.
    again = ReportClient("http://x", 1, "t", tmp_path / "spool", sender=sender, sleep=lambda s: None)
    down["on"] = False
    assert again.flush() is True
    assert [b["metrics"][0]["step"] for b in delivered] == [0, 1, 2] and again.pending() == 0


@pytest.mark.slow  # a live server stopped and restarted mid-run: ~8 s
@pytest.mark.django_db(transaction=True)
def test_searchlab_unreachable_mid_run_loses_and_doubles_nothing(tmp_path, settings):
    """The fault test: a trainer reports through the wrapper while the web app goes down for some seconds."""
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    run = _run()
    server = RestartableServer()
    server.start()
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"output_dir": str(folder / "output")}))
    command = [
        sys.executable,
        "-m",
        "trainer.report_client",
        "--url",
        server.url,
        "--run-id",
        str(run.pk),
        "--run-dir",
        str(folder),
        "--output-dir",
        str(folder / "output"),
        "--interval",
        "0.2",
        "--drain-seconds",
        "60",
        "--",
        sys.executable,
        str(FAKE_TRAINER),
        str(folder / "config.json"),
        "--steps",
        "40",
        "--sleep",
        "0.2",
        "--samples",
        "2",
    ]
    env = {
        "PATH": "/usr/bin:/bin",
        "SEARCHLAB_RUN_TOKEN": ingest.ingest_token(run.pk),
        "PYTHONPATH": str(REPO),
    }
    wrapper = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while MetricPoint.objects.filter(run=run).count() < 20:  # the run is reporting
            assert time.monotonic() < deadline and wrapper.poll() is None
            time.sleep(0.1)
        server.stop()
        down_at = time.monotonic()
        time.sleep(4.0)
        server.start()
        unreachable = time.monotonic() - down_at
        output, _ = wrapper.communicate(timeout=120)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
        server.stop()
    assert wrapper.returncode == 0, output
    summary = json.loads(output.rsplit("searchlab report: ", 1)[1].splitlines()[0])
    metrics_rows = [
        json.loads(line) for line in (folder / "output" / "metrics.jsonl").read_text().splitlines()
    ]
    written = sum(1 for row in metrics_rows if row["value"] == row["value"]) + len(
        (folder / "output" / "samples.jsonl").read_text().splitlines()
    )
    stored = MetricPoint.objects.filter(run=run).count() + Trajectory.objects.filter(run=run).count()
    print(
        f"\nfault test: {written} rows written by the trainer, {summary['rows_sent']} sent, {stored} stored, "
        f"searchlab down {unreachable:.1f} s, {summary['failed_requests']} failed requests, "
        f"client saw {summary['seconds_unreachable']} s unreachable"
    )
    assert summary["failed_requests"] > 0  # it really was cut off mid-run
    assert summary["batches_pending"] == 0
    assert written == summary["rows_sent"] == summary["rows_acknowledged"] == stored == 40 * 4 + 40 * 2
    assert IngestedSample.objects.filter(run=run).count() == 80
    assert Run.objects.get(pk=run.pk).log_tail.endswith("step 40 done")


@pytest.mark.django_db
def test_a_rewritten_file_is_read_again_and_stores_nothing_twice(tmp_path):
    """A resumed trainer truncates samples.jsonl to its checkpoint and appends: the kept rows keep their keys."""
    _fake_output(tmp_path, steps=3, samples=1)
    run = _run()
    tailer = OutputTailer(tmp_path / "output")
    ingest.store_batch(run_id=run.pk, batch=tailer.read())
    samples = tmp_path / "output" / "samples.jsonl"
    kept = samples.read_text().splitlines()[:1]  # resumed from step 1
    samples.write_text(kept[0] + "\n" + kept[0].replace('"step": 1', '"step": 4') + "\n")
    result = ingest.store_batch(run_id=run.pk, batch=tailer.read())
    assert result["samples_duplicate"] == 1 and result["samples_new"] == 1
    assert Trajectory.objects.filter(run=run).count() == 4
