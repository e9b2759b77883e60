"""The trainer on a tiny random Llama: env-mask gradients, GRPO and PPO smoke runs, GAE, TIRESRAG shaping, resume."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from scoring.rewards.tiresrag_group import tiresrag_group_advantages
from trainer.algorithms import masked_gae
from trainer.callbacks import METRICS_FILE, SAMPLES_FILE
from trainer.rollout import Rollout, RolloutRequest, Segment
from trainer.train import build_trainer, run

from .conftest import ConfigFactory


def _snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in module.named_parameters()}


def _changed(before: dict[str, torch.Tensor], module: torch.nn.Module) -> bool:
    return any(not torch.equal(before[name], p.detach()) for name, p in module.named_parameters())


def _metrics(output_dir: str) -> list[dict[str, Any]]:
    lines = (Path(output_dir) / METRICS_FILE).read_text().splitlines()
    return [json.loads(line) for line in lines]


def _generation_batch(trainer: Any) -> list[dict[str, Any]]:
    """One generation batch as TRL's sampler makes it: each question repeated num_generations times."""
    rows = list(trainer.train_dataset)
    g = trainer.num_generations
    return [dict(rows[q]) for q in range(trainer.args.generation_batch_size // g) for _ in range(g)]


def test_it_gives_retrieved_tokens_exactly_zero_gradient(
    make_config: ConfigFactory, model: Any, tokenizer: Any
) -> None:
    trainer = build_trainer(make_config(), model=model, tokenizer=tokenizer)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    inputs = trainer._generate_and_score_completions(_generation_batch(trainer))
    captured: list[torch.Tensor] = []
    original = trainer._get_per_token_logps_and_entropies

    def keep_logps(*args: Any, **kwargs: Any) -> Any:
        logps, entropies, aux = original(*args, **kwargs)
        logps.retain_grad()
        captured.append(logps)
        return logps, entropies, aux

    trainer._get_per_token_logps_and_entropies = keep_logps
    trainer._compute_loss(trainer.model, inputs).backward()

    grad = captured[0].grad
    completion = inputs["completion_mask"].bool()
    retrieved = completion & (inputs["tool_mask"] == 0)
    policy = completion & (inputs["tool_mask"] == 1) & (inputs["advantages"].unsqueeze(1) != 0)
    assert retrieved.sum() > 0 and policy.sum() > 0  # the batch really has both kinds
    assert torch.count_nonzero(grad[retrieved]) == 0  # exactly zero, not merely small
    assert torch.all(grad[policy] != 0)


def test_it_trains_grpo_with_the_hiprag_reward(
    make_config: ConfigFactory, model: Any, tokenizer: Any
) -> None:
    config = make_config()
    trainer = build_trainer(config, model=model, tokenizer=tokenizer)
    before = _snapshot(trainer.model)

    trainer.train()

    assert any("loss" in entry for entry in trainer.state.log_history)
    assert _changed(before, trainer.model)
    rows = _metrics(config.output_dir)
    keys = {row["key"] for row in rows if row["step"] == 2}
    assert {"reward/mean", "reward/std", "reward/answer/mean", "reward/process_bonus/std"} <= keys
    assert {"osr", "searches/mean", "format_ok_rate", "accuracy", "completion_length"} <= keys
    assert "usr" in {row["key"] for row in rows}  # only in steps whose batch had a judged non-search step
    assert {"entropy", "clip_ratio", "step_time", "loss"} <= keys
    assert {"groups/spread_rate", "groups/process_reordered_rate"} <= keys  # issue 21: per-step group metrics
    assert all(0 <= row["value"] <= 1 for row in rows if row["key"].startswith("groups/"))
    assert {row["step"] for row in rows} == {1, 2}
    samples = [json.loads(line) for line in (Path(config.output_dir) / SAMPLES_FILE).read_text().splitlines()]
    assert samples and samples[0]["steps"] and "verdicts" in samples[0]["steps"][0]


def test_an_under_only_run_scores_search_only_rollouts_with_the_batch_average(
    make_config: ConfigFactory, model: Any, tokenizer: Any
) -> None:
    # HiPRAG Sec. 5.3 ablation: the scripted rollouts' search-only trajectories have no non-search step; the run
    # used to die at the first correct one (a bare ValueError from scoring.score).
    config = make_config(reward={"params": {"process": "under_only"}}, training={"max_steps": 2, "seed": 1})
    trainer = build_trainer(config, model=model, tokenizer=tokenizer)
    batches: list[list[Any]] = []
    record = trainer.ledger.record
    trainer.ledger.record = lambda scores: (batches.append(list(scores)), record(scores))  # type: ignore[method-assign]
    trainer.train()
    borrowed = 0
    for batch in batches:
        assert all(s.reward is not None for s in batch)
        earned = [s.reward.components["process_bonus"] for s in batch if s.reward.components.get("n_counted")]
        for s in batch:
            if s.cem and s.trajectory.valid and s.reward.components.get("n_counted") == 0:
                borrowed += 1  # correct, no non-search step: the batch's average bonus
                assert s.reward.components["process_bonus"] == pytest.approx(
                    sum(earned) / len(earned) if earned else 0.0
                )
    assert borrowed >= 2
    assert "groups/spread_rate" in {row["key"] for row in _metrics(config.output_dir)}


def test_it_trains_ppo_policy_and_critic(make_config: ConfigFactory, model: Any, tokenizer: Any) -> None:
    config = make_config(method="autosearch", algorithm="ppo", ppo={"critic_learning_rate": 1e-2})
    trainer = build_trainer(config, model=model, tokenizer=tokenizer)
    policy_before, critic_before = _snapshot(trainer.model), _snapshot(trainer.critic)

    trainer.train()

    assert any("ppo/value_loss" in entry for entry in trainer.state.log_history)
    assert _changed(policy_before, trainer.model)
    assert _changed(critic_before, trainer.critic)
    assert "ppo/value_loss" in {row["key"] for row in _metrics(config.output_dir)}


def test_it_computes_gae_over_policy_tokens_only() -> None:
    # Row 0: γ=0.9, λ=0.8; tokens 2-3 are retrieved (mask 0) with absurd values that must not be used.
    #   t=4: δ = 1 + 0.9·0 − 0.3 = 0.7                         Â = 0.7
    #   t=1: δ = 0.5 + 0.9·0.3 − 0.2 = 0.57 (next policy token is t=4)   Â = 0.57 + 0.72·0.7 = 1.074
    #   t=0: δ = 0 + 0.9·0.2 − 0.1 = 0.08                       Â = 0.08 + 0.72·1.074 = 0.85328
    rewards = torch.tensor([[0.0, 0.5, 0.0, 0.0, 1.0]])
    values = torch.tensor([[0.1, 0.2, 9.0, 9.0, 0.3]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0, 1.0]])
    advantages, returns = masked_gae(rewards, values, mask, gamma=0.9, lam=0.8)
    assert advantages[0].tolist() == pytest.approx([0.85328, 1.074, 0.0, 0.0, 0.7])
    assert returns[0].tolist() == pytest.approx([0.95328, 1.274, 0.0, 0.0, 1.0])


def test_it_reduces_gae_to_return_minus_value_with_unit_discounts() -> None:
    # γ = λ = 1 (veRL's defaults): Â_t = Σ rewards from t − V_t; padding after the completion is ignored.
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, 0.25, 0.5, 7.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0]])
    advantages, returns = masked_gae(rewards, values, mask, gamma=1.0, lam=1.0)
    assert advantages[0].tolist() == pytest.approx([0.5, 0.75, 0.5, 0.0, 0.0])
    assert returns[0].tolist() == pytest.approx([1.0, 1.0, 1.0, 0.0, 0.0])


class _TiresragRollout:
    """Group 1 mixes right and wrong answers (kept); group 2 is all right (dropped by the group filter)."""

    answers = ("Paris", "Lyon", "Paris", "Paris")
    verdicts = ((True, 0.9), (False, 0.2), (True, 0.6), (False, 0.5))

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, requests: Sequence[RolloutRequest], policy: Any) -> list[Rollout]:
        out = []
        for request in requests:
            answer = self.answers[request.index]
            sufficient, thinking = self.verdicts[request.index]
            parts = [
                ("<think>s</think>\n<search> q </search>", True),
                ("\n\n<information>d</information>\n\n", False),
                (f"<think>t</think>\n<answer> {answer} </answer>", True),
            ]
            segments = tuple(Segment(tuple(self.tokenizer(t)["input_ids"]), m, t) for t, m in parts)
            out.append(
                Rollout(
                    prompt_ids=tuple(self.tokenizer(request.prompt)["input_ids"]),
                    segments=segments,
                    text="".join(t for t, _ in parts),
                    judgements={"sufficiency": sufficient, "thinking": thinking},
                )
            )
        return out


def test_it_shapes_tiresrag_groups_as_scoring_does(
    make_config: ConfigFactory, model: Any, tokenizer: Any
) -> None:
    config = make_config(method="tiresrag")
    trainer = build_trainer(config, model=model, tokenizer=tokenizer, rollout=_TiresragRollout(tokenizer))
    trainer.model.train()

    output = trainer._generate_and_score_completions(_generation_batch(trainer))

    rewards = [s.reward for s in trainer.ledger.latest]
    kept = tiresrag_group_advantages(rewards[:2])
    dropped = tiresrag_group_advantages(rewards[2:])
    assert kept.kept and not dropped.kept
    assert kept.advantages[0] > 0 > kept.advantages[1]
    assert output["advantages"].tolist() == pytest.approx([*kept.advantages, 0.0, 0.0], abs=1e-6)
    # A dropped group leaves the loss entirely (no policy gradient, no KL); the kept one keeps its env mask.
    assert output["tool_mask"][2:].sum() == 0
    policy = output["completion_mask"][:2] * output["tool_mask"][:2]
    assert 0 < policy.sum() < output["completion_mask"][:2].sum()


@pytest.mark.slow
def test_it_resumes_from_a_checkpoint(make_config: ConfigFactory) -> None:
    config = make_config(algorithm="ppo", method="search_r1", training={"save_steps": 2, "max_steps": 2})
    run(config)
    checkpoint = Path(config.output_dir) / "checkpoint-2"
    assert (checkpoint / "critic.pt").is_file() and (checkpoint / "optimizer.pt").is_file()

    resumed = make_config(
        algorithm="ppo",
        method="search_r1",
        training={"save_steps": 2, "max_steps": 3, "resume_from_checkpoint": "latest"},
    )
    trainer = run(resumed)

    assert trainer.state.global_step == 3
    steps = [row["step"] for row in _metrics(config.output_dir) if row["key"] == "loss"]
    assert steps == [1, 2, 3]


def test_a_time_budget_ends_training_after_the_step_that_spends_it_and_saves_the_model(
    make_config: ConfigFactory,
) -> None:
    config = make_config(training={"max_steps": 5, "max_seconds": 1e-6})

    trainer = run(config)

    assert trainer.state.global_step == 1  # the first step's end is past any positive budget
    assert (Path(config.output_dir) / "model.safetensors").is_file()


def test_a_stop_file_ends_training_at_its_step_and_saves_the_model(
    make_config: ConfigFactory, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    stop.write_text("2\n")
    config = make_config(training={"max_steps": 5, "stop_file": str(stop)})

    trainer = run(config)

    assert trainer.state.global_step == 2
    assert (Path(config.output_dir) / "model.safetensors").is_file()
