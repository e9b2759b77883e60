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

from scoring.formats.searchr1 import make_prefix
from scoring.rewards import hiprag as hiprag_rewards
from scoring.rewards import searchr1
from scoring.scorer import score
from tests.webapp.training.live import RestartableServer
from tests.webapp.training.verl_script import HIPRAG
from trainer.report_client import ReportClient
from trainer.verl_follower import VerlFollower, follow
from trainer.verl_reward import (
    BatchBonusUnavailable,
    apply_batch_average,
    compute_score,
    compute_score_batch,
)
from webapp.runs.models import MetricPoint, Run
from webapp.trajectories.models import JudgeVerdict, Trajectory

pytestmark = pytest.mark.verl

REPO = Path(__file__).resolve().parents[3]
VERL_DIR = REPO / "var" / "verl-0.9.1"
SCRIPT = Path(__file__).with_name("verl_script.py")
REWARD_LOOP_SCRIPT = Path(__file__).with_name("verl_reward_loop_script.py")


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
    # veRL hands the response alone; the released prompt is put back in front, so one answer span counts
    assert (
        compute_score("nq", "<answer>Paris</answer>", ["Paris"], method="search_r1", mode="reference")[
            "score"
        ]
        == 1.0
    )
    broken = compute_score_batch(["nq"], ["no tags"], ["Paris"], None, method="hiprag")[0]
    assert broken["score"] == 0.0 and json.loads(broken["searchlab"])["format_ok"] is False


def test_search_r1_reference_mode_scores_the_response_alone_as_the_released_code_scores_prompt_and_response():
    # Search-R1's qa_em.compute_score_em on its prompt + this response gives 1.0 (searchr1_reward.jsonl, the first
    # vectors), and so does veRL's search_r1_like_qa_em on the response alone.
    result = compute_score(
        "nq",
        "<think>I know this.</think>\n<answer> Paris </answer>",
        {"target": ["Paris"]},
        {"searchlab": {"method": "search_r1", "mode": "reference"}},
    )
    assert result["score"] == 1.0 and json.loads(result["searchlab"])["error"] is None
    released = searchr1.searchr1_em_reward_reference(
        make_prefix("What is the capital of France?")
        + "<think>I know this.</think>\n<answer> Paris </answer>",
        ["Paris"],
    )
    assert released == 1.0
    # a response without an answer gets the prompt's example, as in the released code
    no_answer = {"searchlab": {"method": "search_r1", "mode": "reference"}}
    assert compute_score("nq", "<think>hmm</think>", {"target": ["Beijing"]}, no_answer)["score"] == 1.0
    assert compute_score("nq", "<think>hmm</think>", {"target": ["Paris"]}, no_answer)["score"] == 0.0
    assert compute_score("nq", "<answer> Lyon </answer>", {"target": ["Paris"]}, no_answer)["score"] == 0.0


@pytest.mark.parametrize("mode", ["paper", "reference"])
def test_golds_that_are_not_strings_are_compared_as_strings(mode):
    # Search-R1's em_check("1889", [1889]) raises (normalize_answer on an int); searchlab compares "1889"
    response = "<think>x</think>\n<answer>1889</answer>"
    result = compute_score("nq", response, {"target": [1889]}, None, method="search_r1", mode=mode)
    assert result["score"] == 1.0 and json.loads(result["searchlab"])["error"] is None
    # a string target is one answer, not its characters (the released code would match "1")
    one = response.replace("1889", "1")
    as_string = compute_score("nq", one, {"target": "1889"}, None, method="search_r1", mode=mode)["score"]
    as_list = compute_score("nq", one, {"target": ["1889"]}, None, method="search_r1", mode=mode)["score"]
    assert as_string == as_list < 1.0


def test_hiprag_reference_validation_path_scores_the_response_alone():
    # HiPRAG's compute_score_em with structure_format_score = 0 (its val_reward_fn) is CEM of extract_solution,
    # whose ≥2-span rule counts the prompt's own <answer> span.
    validation = {
        "question": "What is the capital of France?",
        "searchlab": {
            "method": "hiprag",
            "mode": "reference",
            "reference_params": {"structure_format_score": 0},
        },
    }
    assert compute_score("nq", HIPRAG, {"target": ["Paris"]}, validation)["score"] == 1.0
    assert compute_score("nq", HIPRAG, {"target": ["Lyon"]}, validation)["score"] == 0.0
    assert hiprag_rewards.hiprag_reward_reference(HIPRAG, ["Paris"], [], structure_format_score=0) == 0


def test_a_per_sample_reward_refuses_hiprags_batch_average_instead_of_scoring_it_0():
    with pytest.raises(BatchBonusUnavailable, match=r"process='over_only'.*SearchlabAgentLoopManager"):
        compute_score("nq", HIPRAG, ["Paris"], None, method="hiprag", params={"process": "over_only"})
    # the batch manager sees the batch; the default process needs no batch at all
    assert compute_score_batch(
        ["nq"], [HIPRAG], ["Paris"], None, method="hiprag", params={"process": "over_only"}
    )
    assert compute_score("nq", HIPRAG, ["Paris"], None, method="hiprag")["score"] == pytest.approx(1.4)


def test_apply_batch_average_fills_pending_samples_with_the_mean_earned_bonus():
    def detail(entry):
        return json.dumps({"components": {"process_bonus": 0.0}, "batch_bonus": entry})

    group = json.dumps({"process": "over_only"})
    other = json.dumps({"process": "under_only"})
    details = [
        detail({"group": group, "earned": 0.4}),
        detail({"group": group, "pending": True}),
        detail({"group": group, "earned": 0.2}),
        detail({"group": other, "pending": True}),  # nobody of its settings earned a bonus: 0
        "not json",
    ]
    scores, filled = apply_batch_average([1.4, 1.0, 1.2, 1.0, 0.0], details)
    assert scores == pytest.approx([1.4, 1.3, 1.2, 1.0, 0.0])
    assert json.loads(filled[1])["components"]["process_bonus"] == pytest.approx(0.3)
    assert json.loads(filled[1])["batch_bonus"] == {
        "group": group,
        "pending": False,
        "average": pytest.approx(0.3),
        "n_earned": 2,
    }
    assert filled[4] == "not json" and filled[0] == details[0]


def test_the_reward_loop_manager_defers_only_when_the_agent_loop_manager_will_fill_the_batch():
    from types import SimpleNamespace

    from trainer.verl_reward_loop import AGENT_LOOP_MANAGER, _batch_is_finished_by_us

    def config(manager, reward_model):
        return SimpleNamespace(
            actor_rollout_ref=SimpleNamespace(
                rollout=SimpleNamespace(agent={"agent_loop_manager_class": manager})
            ),
            reward={"reward_model": reward_model},
        )

    assert _batch_is_finished_by_us(config(AGENT_LOOP_MANAGER, {"enable": False}))
    assert _batch_is_finished_by_us(
        config(AGENT_LOOP_MANAGER, {"enable": True, "enable_resource_pool": True})
    )
    assert not _batch_is_finished_by_us(config(None, {"enable": False}))  # veRL's own AgentLoopManager
    # a colocated reward model: veRL scores after the agent loop, where our manager never sees rewards
    assert not _batch_is_finished_by_us(config(AGENT_LOOP_MANAGER, {"enable": True}))


@pytest.mark.slow
def test_verl_reward_loop_gives_hiprags_ablation_the_batch_average(verl_path, tmp_path):
    """veRL 0.9.1's default reward path: AgentLoopManager → AgentLoopWorker → RewardLoopWorker → reward manager."""
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": f"{verl_path}:{REPO}", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, str(REWARD_LOOP_SCRIPT), str(tmp_path)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    from tests.webapp.training.verl_reward_loop_script import QUESTION, RESPONSES

    # What the batch is owed: score_batch over the whole batch (HiPRAG Sec. 5.3), as veRL's batch manager gets it.
    expected = [
        r["score"]
        for r in compute_score_batch(
            ["nq"] * len(RESPONSES),
            RESPONSES,
            [{"target": ["Paris"]}] * len(RESPONSES),
            [{"question": QUESTION}] * len(RESPONSES),
            method="hiprag",
            params={"process": "over_only"},
        )
    ]
    assert expected == pytest.approx(
        [1.4, 1.3, 0.2, 1.2, 1.3, 0.2]
    )  # 1 + mean(0.4, 0.2) for the no-search ones
    deferred = result["deferred"]
    assert (deferred["manager"], deferred["reward_manager"]) == (
        "SearchlabAgentLoopManager",
        "SearchlabRewardManager",
    )
    assert deferred["rewards"] == pytest.approx(expected, abs=1e-6)  # rm_scores are float32
    pending = [d["batch_bonus"] for d in deferred["details"] if d.get("batch_bonus", {}).get("n_earned")]
    assert [b["average"] for b in pending] == pytest.approx([0.3, 0.3])
    assert deferred["reward_extra_keys"] == ["score", "searchlab"]
    # veRL's own naive reward-loop manager with compute_score: a clear refusal, not a bonus of 0
    assert result["plain"]["error"].startswith("BatchBonusUnavailable: HiPRAG process='over_only'")
    print(f"\nveRL 0.9.1 Reward Loop, both configurations: {time.monotonic() - started:.1f} s")


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
