"""trainer.verl_follower on a veRL dump that holds messages (veRL's tool agent loop shape: arguments as an object,
tool messages without ids): sent as chat trajectories, stored through ingest with their search steps."""

from __future__ import annotations

import json

import pytest

from tests.webapp.factories import RunFactory
from trainer.verl_follower import VerlFollower
from webapp.training.ingest import store_batch
from webapp.trajectories.models import Trajectory

pytestmark = pytest.mark.django_db


def tool_loop_messages(answer: str) -> list[dict]:
    return [
        {"role": "user", "content": "Who wrote Hamlet?"},
        {
            "role": "assistant",
            "content": "Let me search.",
            "tool_calls": [
                {"type": "function", "function": {"name": "search", "arguments": {"query_list": ["Hamlet"]}}}
            ],
        },
        {"role": "tool", "content": "Doc 1 (Title: Hamlet) a tragedy by William Shakespeare"},
        {"role": "assistant", "content": f"<answer>{answer}</answer>"},
    ]


def test_a_dump_with_messages_reaches_the_run_as_chat_trajectories(tmp_path):
    rollouts = tmp_path / "rollouts"
    rollouts.mkdir()
    rows = [
        {
            "input": "prompt",
            "output": "decoded",
            "gts": {"target": ["William Shakespeare"]},
            "score": 1.0,
            "step": 1,
            "messages": tool_loop_messages("William Shakespeare"),
        },
        # a reward function may put the list in reward_extra_info as JSON text
        {
            "input": "prompt",
            "output": "decoded",
            "gts": {"target": ["William Shakespeare"]},
            "score": 0.0,
            "step": 1,
            "messages": json.dumps(tool_loop_messages("Marlowe")),
        },
        {
            "input": "prompt",
            "output": "<think>x</think><answer>Shakespeare</answer>",
            "gts": ["Shakespeare"],
            "step": 1,
        },
    ]
    (rollouts / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    batch = VerlFollower(rollouts, method="search_r1").read()
    assert [s["row"].get("format") for s in batch["samples"]] == ["chat", "chat", None]
    assert batch["samples"][0]["row"]["question"] == "Who wrote Hamlet?"  # the first user message
    metrics = {m["key"]: m["value"] for m in batch["metrics"]}
    # 2 of 3 right (cover EM), 3 of 3 well formed, 1 search in each chat sample, none in the tag one
    assert metrics["accuracy"] == pytest.approx(2 / 3) and metrics["format_ok_rate"] == 1.0
    assert metrics["searches/mean"] == pytest.approx(2 / 3)

    run = RunFactory(method="search_r1")
    stored = store_batch(run_id=run.pk, batch=batch)
    assert stored["samples"] == 3, stored
    chats = Trajectory.objects.filter(run=run, format="chat").order_by("pk")
    assert [t.final_answer for t in chats] == ["William Shakespeare", "Marlowe"]
    step = chats[0].steps.get(index=0)
    assert (step.kind, step.query, step.context) == ("search", "Hamlet", rows[0]["messages"][2]["content"])
    assert Trajectory.objects.get(run=run, format="search_r1").final_answer == "Shakespeare"
