"""veRL 0.9.1's own code against searchlab: its reward managers (naive and batch) call trainer.verl_reward, its dump
writer and file logger write a run's files, and trainer.verl_follower sends them to a searchlab run over HTTP.

veRL does not install beside our stack (it requires transformers<5.11); requirements-verl.txt is installed with
``--no-deps`` into ``var/verl-0.9.1`` once and put first on PYTHONPATH of a subprocess (verl_script.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scoring.scorer import score
from tests.webapp.training.live import RestartableServer
from tests.webapp.training.verl_script import HIPRAG
from trainer.report_client import ReportClient
from trainer.verl_follower import VerlFollower, follow
from trainer.verl_reward import compute_score, compute_score_batch
from webapp.runs.models import MetricPoint, Run
from webapp.trajectories.models import JudgeVerdict, Trajectory

pytestmark = pytest.mark.verl

REPO = Path(__file__).resolve().parents[3]
VERL_DIR = REPO / "var" / "verl-0.9.1"
SCRIPT = Path(__file__).with_name("verl_script.py")


@pytest.fixture(scope="session")
def verl_path() -> Path:
    """veRL 0.9.1's code (and the few pure-Python packages it imports that .venv lacks), installed once."""
    marker = VERL_DIR / ".installed"
    wanted = (REPO / "requirements-verl.txt").read_text()
    if not marker.is_file() or marker.read_text() != wanted:  # first use, or the pins changed
        started = time.monotonic()
        shutil.rmtree(VERL_DIR, ignore_errors=True)
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(VERL_DIR)]
        subprocess.run([*pip, "-r", str(REPO / "requirements-verl.txt")], check=True)
        marker.write_text(wanted)
        print(f"\nveRL 0.9.1 installed under var/ in {time.monotonic() - started:.1f} s")
    return VERL_DIR


def test_compute_score_is_scorings_reward():
    text = HIPRAG
    result = compute_score(
        "nq", text, {"target": ["Paris"]}, {"question": "What is the capital of France?"}, method="hiprag"
    )
    detail = json.loads(result["searchlab"])
    expected = score("hiprag", text, ["Paris"], judgements={"step_flags": ["false", "false"]}).reward.total
    assert result["score"] == expected == pytest.approx(1.4)
    assert [v["detector"] for s in detail["steps"] for v in s["verdicts"]] == ["over_search", "under_search"]
    # Search-R1, paper and reference mode; an unparseable answer scores 0 with its reason kept.
    # (The released extract_solution skips the prompt's example answer: it takes the last of at least two spans.)
    prompted = "Answer like <answer> Beijing </answer>. <think>x</think><answer>Paris</answer>"
    assert compute_score("nq", prompted, ["Paris"], method="search_r1", mode="reference")["score"] == 1.0
    assert (
        compute_score("nq", "<answer>Paris</answer>", ["Paris"], method="search_r1", mode="reference")[
            "score"
        ]
        == 0.0
    )
    broken = compute_score_batch(["nq"], ["no tags"], ["Paris"], None, method="hiprag")[0]
    assert broken["score"] == 0.0 and json.loads(broken["searchlab"])["format_ok"] is False


@pytest.mark.django_db(transaction=True)
def test_verl_managers_dumps_and_follower_reach_a_searchlab_run(verl_path, tmp_path, settings, api_client):
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": f"{verl_path}:{REPO}", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["verl"] == "0.9.1"
    # veRL's naive (per sample) and batch managers put our reward on the last response token.
    assert result["naive"] == result["batch"] == pytest.approx([1.4, 0.2, 0.0, 1.4])
    assert result["reference"][0] == pytest.approx(
        1.8
    )  # HiPRAG's released compute_score_em: +0.4 with no over-search
    assert result["extra_keys"] == ["score", "searchlab"]
    print(f"\nveRL 0.9.1 managers + dump writer: {time.monotonic() - started:.1f} s")

    settings.ALLOWED_HOSTS = ["127.0.0.1", "testserver"]
    # The run a veRL user follows into: made through the API, with its ingest token.
    made = api_client.post(
        "/api/v1/runs/external/",
        {"name": "verl run", "method": "hiprag", "model_name": "Qwen2.5-3B"},
        format="json",
    )
    assert made.status_code == 201, made.content
    run, token = Run.objects.get(pk=made.json()["run"]), made.json()["token"]
    assert run.status == Run.Status.RUNNING
    server = RestartableServer()
    server.start()
    try:
        client = ReportClient(server.url, run.pk, token, tmp_path / "spool")
        follower = VerlFollower(
            tmp_path / "rollouts", method="hiprag", metrics_file=tmp_path / "metrics.jsonl"
        )
        follow(follower, client, interval=0.1, until=lambda: True, final="finished")
        # A restarted follower reads everything again: nothing is stored twice.
        again = ReportClient(server.url, run.pk, token, tmp_path / "spool2")
        follow(
            VerlFollower(tmp_path / "rollouts", method="hiprag", metrics_file=tmp_path / "metrics.jsonl"),
            again,
            until=lambda: True,
        )
    finally:
        server.stop()
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED
    assert Trajectory.objects.filter(run=run).count() == 8  # 4 samples × 2 steps, once
    first = Trajectory.objects.filter(run=run, training_step=1).order_by("pk").first()
    assert first.total_reward == pytest.approx(1.4) and first.n_searches == 1
    assert set(JudgeVerdict.objects.filter(trajectory=first).values_list("detector", "outcome")) == {
        ("over_search", "false"),
        ("under_search", "false"),
    }
    points = dict(MetricPoint.objects.filter(run=run, step=2).values_list("key", "value"))
    assert points["verl/actor/pg_loss"] == pytest.approx(0.2) and points["loss"] == pytest.approx(0.2)
    assert points["reward/mean"] == pytest.approx(0.75) and points["format_ok_rate"] == pytest.approx(0.75)
    assert points["accuracy"] == pytest.approx(0.5)
