"""DAPO's dynamic sampling (trainer.dynamic_sampling) through TRL's real generation-and-scoring path on a tiny model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from trainer.callbacks import METRICS_FILE
from trainer.dynamic_sampling import DynamicSampler, reward_scorer
from trainer.rewards import MethodReward, ScoreLedger
from trainer.rollout import Rollout, RolloutRequest, Segment
from trainer.scripted import _hiprag
from trainer.train import build_trainer, load_rows

from .conftest import ConfigFactory

# Each question's two rollouts answer these. "flat*": both wrong alike, no spread. "mixed": one right, one wrong.
# "berlin" (gold Berlin): answers Berlin and Paris; against its own gold Berlin wins, against the others' Paris would.
QUESTIONS = {
    "flat": ("Paris", ("Lyon", "Lyon")),
    "mixed": ("Paris", ("Paris", "Lyon")),
    "berlin": ("Berlin", ("Berlin", "Paris")),
    "flat2": ("Paris", ("Lyon", "Lyon")),
    "flat3": ("Paris", ("Lyon", "Lyon")),
    "flat4": ("Paris", ("Lyon", "Lyon")),
}
ROLLOUT_KEYS = {"prompt_ids", "completion_ids", "logprobs", "env_mask", "trajectory_text", "judgements"}


class _AnswerRollout:
    """HiPRAG trajectories with one search, answering what :data:`QUESTIONS` says for the row's question; records
    every call's requests and the heartbeat's detail when it was made."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.progress: Any = None  # set by build_trainer
        self.calls: list[list[RolloutRequest]] = []
        self.details: list[str] = []

    def _ids(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def __call__(self, requests: Sequence[RolloutRequest], policy: Any) -> list[Rollout]:
        self.calls.append(list(requests))
        if self.progress is not None:
            self.details.append(str(self.progress.snapshot()["detail"]))
        out = []
        for request in requests:
            answer = QUESTIONS[str(request.row["id"])][1][request.index % 2]
            parts = _hiprag("capital", answer, 1)
            out.append(
                Rollout(
                    prompt_ids=self._ids(request.prompt),
                    segments=tuple(Segment(self._ids(t), m, t) for t, m in parts),
                    text="".join(t for t, _ in parts),
                    judgements={"step_flags": [False]},
                )
            )
        return out


def _questions(tmp_path: Path, ids: Sequence[str]) -> str:
    path = tmp_path / "questions.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": i, "question": f"Question {i}?", "golden_answers": [QUESTIONS[i][0]]}) + "\n"
            for i in ids
        )
    )
    return str(path)


def _trainer(
    make_config: ConfigFactory,
    model: Any,
    tokenizer: Any,
    tmp_path: Path,
    ids: Sequence[str],
    **training: Any,
) -> tuple[Any, _AnswerRollout]:
    config = make_config(data={"path": _questions(tmp_path, ids)}, training=training)
    rollout = _AnswerRollout(tokenizer)
    trainer = build_trainer(config, model=model, tokenizer=tokenizer, rollout=rollout)
    trainer.model.train()
    return trainer, rollout


def _batch(trainer: Any) -> list[dict[str, Any]]:
    """The first two questions, each twice, as TRL's sampler lays out a generation batch (the flat one first)."""
    rows = list(trainer.train_dataset)
    return [dict(rows[q]) for q in range(2) for _ in range(trainer.num_generations)]


@pytest.mark.parametrize("spares", [0, 1])
def test_a_flat_group_is_replaced_and_scored_against_its_own_golds(
    make_config: ConfigFactory, model: Any, tokenizer: Any, tmp_path: Path, spares: int
) -> None:
    trainer, rollout = _trainer(
        make_config,
        model,
        tokenizer,
        tmp_path,
        ("flat", "mixed", "berlin"),
        dynamic_sampling=True,
        dynamic_sampling_spare_groups=spares,
    )

    output = trainer._generate_and_score_completions(_batch(trainer))

    # The question not in the batch, in the flat group's place (indices 0 and 1): rolled out in a round of its own
    # after the batch, or as a spare in the batch's own call (past the batch's places, then renumbered).
    if spares:
        assert len(rollout.calls) == 1
        assert [(r.row["id"], r.index) for r in rollout.calls[0][4:]] == [("berlin", 4), ("berlin", 5)]
        assert "with 1 spare group (dynamic sampling)" in rollout.details[0]
    else:
        assert len(rollout.calls) == 2
        assert [(r.row["id"], r.index) for r in rollout.calls[1]] == [("berlin", 0), ("berlin", 1)]
        assert "drawing 1 replacement group (dynamic sampling, round 1 of 2)" in rollout.details[1]
    # TRL's own reward call (recorded by the trainer's MethodReward) scored it against Berlin, not the flat Paris.
    scores = trainer.ledger.latest
    assert [s.row["id"] for s in scores] == ["berlin", "berlin", "mixed", "mixed"]
    assert scores[0].golds == scores[1].golds == ("Berlin",)
    assert scores[0].prompt == "Question berlin?"
    assert (scores[0].cem, scores[1].cem) == (True, False)  # the Berlin answer is the right one
    assert scores[0].reward.total > scores[1].reward.total
    # The policy is trained on the replacement's prompt tokens, and the group now has non-zero advantages.
    prompt = output["prompt_ids"][0][output["prompt_mask"][0].bool()].tolist()
    assert prompt == tokenizer("Question berlin?", add_special_tokens=False)["input_ids"]
    assert output["advantages"][0] > 0 > output["advantages"][1]
    metrics = trainer._metrics["train"]
    assert metrics["groups/spread_rate_before"] == [0.5]
    assert metrics["groups/dynamic_draws"] == [float(1 - spares)]
    assert metrics["groups/spare_groups_used"] == [float(spares)]
    assert metrics["groups/spread_rate"] == [1.0]


def test_a_group_without_a_replacement_with_spread_is_kept_after_max_draws(
    make_config: ConfigFactory, model: Any, tokenizer: Any, tmp_path: Path
) -> None:
    trainer, rollout = _trainer(
        make_config,
        model,
        tokenizer,
        tmp_path,
        ("flat", "mixed", "flat2", "flat3", "flat4"),
        dynamic_sampling=True,
        dynamic_sampling_max_draws=2,
    )

    output = trainer._generate_and_score_completions(_batch(trainer))

    drawn = [call[0].row["id"] for call in rollout.calls[1:]]
    assert len(drawn) == 2 and len(set(drawn)) == 2  # two rounds, two different questions, both flat
    assert [s.row["id"] for s in trainer.ledger.latest] == ["flat", "flat", "mixed", "mixed"]
    assert output["advantages"][:2].tolist() == [0.0, 0.0]
    assert trainer._metrics["train"]["groups/dynamic_draws"] == [2.0]
    assert trainer._metrics["train"]["groups/spread_rate"] == [0.5]


def test_with_dynamic_sampling_off_nothing_changes(
    make_config: ConfigFactory, model: Any, tokenizer: Any, tmp_path: Path
) -> None:
    trainer, rollout = _trainer(make_config, model, tokenizer, tmp_path, ("flat", "mixed", "berlin"))
    returned: list[set[str]] = []
    rollout_func = trainer.rollout_func
    trainer.rollout_func = lambda prompts, t: returned.append(set(out := rollout_func(prompts, t))) or out

    output = trainer._generate_and_score_completions(_batch(trainer))

    assert len(rollout.calls) == 1  # no draws
    assert returned == [ROLLOUT_KEYS | {"rollout_extras"}]  # no row columns ride along
    assert [s.row["id"] for s in trainer.ledger.latest] == ["flat", "flat", "mixed", "mixed"]
    assert output["advantages"][:2].tolist() == [0.0, 0.0]
    metrics = trainer._metrics["train"]
    assert "groups/dynamic_draws" not in metrics and "groups/spread_rate_before" not in metrics
    assert metrics["groups/spread_rate"] == [0.5]


def test_the_draws_are_deterministic_given_the_seed(
    make_config: ConfigFactory, tokenizer: Any, tmp_path: Path
) -> None:
    ids = ("flat", "mixed", "flat2", "flat3", "flat4", "berlin")
    rows = load_rows(make_config(data={"path": _questions(tmp_path, ids)}))
    requests = [
        RolloutRequest(str(rows[q]["prompt"]), rows[q], 2 * q + j) for q in range(2) for j in range(2)
    ]

    def draws(seed: int) -> list[str]:
        rollout = _AnswerRollout(tokenizer)
        sampler = DynamicSampler(
            reward_scorer(MethodReward("hiprag")),
            rows,
            group_size=2,
            max_draws=4,
            seed=seed,
            ledger=ScoreLedger(),
        )
        sampler.fill(requests, rollout(requests, None), rollout, None)
        return [call[0].row["id"] for call in rollout.calls[1:]]

    assert draws(0) == draws(0)
    assert set(draws(0)) <= {"flat2", "flat3", "flat4", "berlin"}  # never a question of the batch
    assert {tuple(draws(seed)) for seed in range(6)} != {tuple(draws(0))}  # the seed decides the order


@pytest.mark.parametrize("dynamic_sampling", [True, False])
def test_the_sampling_metrics_reach_metrics_jsonl(
    make_config: ConfigFactory, model: Any, tokenizer: Any, tmp_path: Path, dynamic_sampling: bool
) -> None:
    trainer, _ = _trainer(
        make_config,
        model,
        tokenizer,
        tmp_path,
        ("flat", "mixed", "berlin", "flat2"),
        dynamic_sampling=dynamic_sampling,
        max_steps=1,
    )

    trainer.train()

    lines = (Path(trainer.args.output_dir) / METRICS_FILE).read_text().splitlines()
    keys = {row["key"]: row["value"] for row in map(json.loads, lines) if row["step"] == 1}
    assert "groups/spread_rate" in keys
    sampling = {
        "groups/dynamic_draws",
        "groups/spread_rate_before",
        "groups/redraw_rounds",
        "groups/spare_groups_used",
        "groups/spare_groups_dropped",
    }
    if dynamic_sampling:
        assert sampling <= set(keys)
        assert 0 <= keys["groups/spread_rate_before"] <= keys["groups/spread_rate"] <= 1
    else:
        assert not sampling & set(keys)
