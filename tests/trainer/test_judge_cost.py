"""Judge cost per training step: the agent rollout's LLM judge calls, errors, tokens and seconds as judge/* metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.judge_client import JUDGE_COST_KEYS, JudgeCostMeter, JudgeStats
from tests.agent.conftest import PASSAGES, KeywordSearcher, Reply, ScriptedBackend, ScriptedServer
from tests.agent.test_rollout import hiprag_policy
from trainer.agent_rollout import AgentRollout
from trainer.callbacks import METRICS_FILE, MetricsCallback
from trainer.rewards import ScoreLedger
from trainer.rollout import RolloutRequest


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.close()


def test_the_meter_sums_batches_until_taken_and_says_nothing_without_an_llm_judge() -> None:
    meter = JudgeCostMeter()
    assert meter.take() == {}  # a heuristic judge: no curve of zeros
    meter.add(
        JudgeStats(
            calls=5, cache_hits=1, errors=1, prompt_tokens=400, completion_tokens=20, latency_seconds=1.5
        )
    )
    meter.add({"calls": 2, "prompt_tokens": 100, "completion_tokens": 8, "latency_seconds": 0.25})
    assert meter.take() == {
        "judge/calls": 6.0,  # cache hits were not sent
        "judge/errors": 1.0,
        "judge/tokens_in": 500.0,
        "judge/tokens_out": 28.0,
        "judge/seconds": 1.75,
    }
    assert meter.take() == {}


class _Policy:
    training = True

    def train(self, mode: bool = True) -> None:
        self.training = mode


def _judged_batch(monkeypatch: pytest.MonkeyPatch, tokenizer: Any, options: dict[str, Any]) -> AgentRollout:
    """A HiPRAG batch of two questions from a scripted policy (one search step, one answer), judged per ``options``."""

    def policy(text: str) -> str:  # each question its own search and conclusion, so its own judge prompt
        reply = hiprag_policy(text)
        return reply.replace("capital of France", "capital city of France") if "Which city" in text else reply

    backend = ScriptedBackend(policy)
    monkeypatch.setattr("agent.backend_transformers.TransformersBackend", lambda *a, **k: backend)
    rollout = AgentRollout("hiprag", tokenizer, KeywordSearcher(PASSAGES), options)
    rows = [
        {"question": question, "golden_answers": ["Paris"], "dataset": "nq"}
        for question in ("What is the capital of France?", "Which city is the capital of France?")
    ]
    rollouts = rollout([RolloutRequest("Q", row, i) for i, row in enumerate(rows)], _Policy())
    assert len(rollouts) == 2
    return rollout


def test_an_endpoint_judges_calls_tokens_and_failures_become_the_steps_judge_metrics(
    monkeypatch: pytest.MonkeyPatch, tokenizer: Any, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script(Reply(status=400))  # one call fails for good: a 4xx is not retried
    endpoint = {"base_url": server.base_url, "model": "judge-m", "max_retries": 0}
    rollout = _judged_batch(monkeypatch, tokenizer, {"judge": endpoint})
    sent = len(server.requests)
    assert sent >= 2  # at least one verdict per trajectory
    callback = MetricsCallback(ScoreLedger(), str(tmp_path), sample_every=0, judge_cost=rollout.judge_cost)
    state = type("State", (), {"is_world_process_zero": True, "global_step": 1})()
    callback.on_log(None, state, None, logs={"loss": 0.5})  # type: ignore[arg-type]
    rows = {
        row["key"]: row["value"]
        for row in map(json.loads, (tmp_path / METRICS_FILE).read_text().splitlines())
        if row["step"] == 1
    }
    # The scripted server reports 11 prompt and 3 completion tokens per answered call.
    assert rows["judge/calls"] == sent
    assert rows["judge/errors"] == 1
    assert rows["judge/tokens_in"] == 11 * (sent - 1) and rows["judge/tokens_out"] == 3 * (sent - 1)
    assert rows["judge/seconds"] > 0
    # The next log holds the next batches only: nothing was judged since.
    callback.on_log(
        None, type("State", (), {"is_world_process_zero": True, "global_step": 2})(), None, logs={}
    )  # type: ignore[arg-type]
    later = [json.loads(line) for line in (tmp_path / METRICS_FILE).read_text().splitlines()]
    assert not [row for row in later if row["step"] == 2 and row["key"] in JUDGE_COST_KEYS]


def test_the_evidence_judge_makes_no_call_and_logs_no_judge_cost(
    monkeypatch: pytest.MonkeyPatch, tokenizer: Any
) -> None:
    rollout = _judged_batch(monkeypatch, tokenizer, {"judge": "evidence"})
    assert rollout.judge_cost.take() == {}


def test_the_trainer_hands_its_rollouts_judge_meter_to_the_metrics_callback(
    make_config: Any, model: Any, tokenizer: Any
) -> None:
    from trainer.train import build_trainer

    config = make_config(rollout={"factory": "agent", "options": {"index": "unused"}})
    rollout = AgentRollout(config.method, tokenizer, KeywordSearcher(PASSAGES), {})
    trainer = build_trainer(config, model=model, tokenizer=tokenizer, rollout=rollout)
    [metrics] = [c for c in trainer.callback_handler.callbacks if isinstance(c, MetricsCallback)]
    assert metrics.judge_cost is rollout.judge_cost
