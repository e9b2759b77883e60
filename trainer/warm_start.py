"""``python -m trainer.warm_start CONFIG``: a short supervised warm start that teaches the policy its method's format.

RL from a model that never writes the format learns nothing: every reward is 0 and every group's advantage is 0.
The papers start from instruct models prompted with their template or from a short supervised warm start; on the
CPU's SmolLM2-135M only the second works. This builds demonstrations (:mod:`trainer.demonstrations`) for every
configured method from a question file with supporting titles and a real index, and fine-tunes the policy on
them with TRL's ``SFTTrainer``, the loss on the model's own tokens only (prompt and retrieved text masked, as in
RL). The output folder is a normal transformers model, offered as the policy of training and evaluation runs.

    output_dir = "var/models/SmolLM2-135M-Instruct-warm"
    index = "var/retrieval/indexes/wiki_multihop-bm25"
    [model]
    path = "var/models/SmolLM2-135M-Instruct"
    [data]
    path = "../shared/data/wiki_multihop/questions.jsonl"

Writes ``demonstrations.jsonl`` (every demonstration, valid or not, with its method and question id: the
benchmark leaves these questions out), ``metrics.jsonl`` (``loss``, ``learning_rate``, ``grad_norm``, ``epoch``
per step, as trainer.callbacks writes them, so the web app plots a loss curve), ``progress.json`` (the heartbeat)
and ``warm_start.json`` (counts and seconds). Exit status: 0 done, 2 bad config (the message names the field).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer.config import ConfigError
from trainer.warm_start_cached import shared_prefixes, step_batches, train_cached
from trainer.warm_start_config import (
    ALL_METHODS,
    WarmStartConfig,
    WarmStartData,
    WarmStartModel,
    WarmStartTraining,
    check_inputs,
    load_warm_start_config,
    rollout_tokens_for,
    warm_start_config,
)
from trainer.warm_start_data import COMMON_KNOWLEDGE, choose_plans, read_rows
from trainer.warm_start_demo import (
    DEMO_DATA,
    DEMO_METHODS,
    DEMO_RECIPE,
    DEMO_TRAINING,
    WARM_MODEL_NAME,
    demo_warm_model_recipe,
    demo_warm_start_values,
    ensure_demo_warm_model,
)

# Importable from here as before: the config (trainer.warm_start_config), the question rows and plans
# (trainer.warm_start_data), the cached trainer's batching (trainer.warm_start_cached) and the demo's warm model
# (trainer.warm_start_demo).
__all__ = [
    "ALL_METHODS",
    "COMMON_KNOWLEDGE",
    "DEMO_DATA",
    "DEMO_METHODS",
    "DEMO_RECIPE",
    "DEMO_TRAINING",
    "WARM_MODEL_NAME",
    "WarmStartConfig",
    "WarmStartData",
    "WarmStartModel",
    "WarmStartTraining",
    "check_inputs",
    "choose_plans",
    "demo_warm_model_recipe",
    "demo_warm_start_values",
    "demonstration_examples",
    "ensure_demo_warm_model",
    "load_warm_start_config",
    "main",
    "read_rows",
    "rollout_tokens_for",
    "run",
    "sft_config",
    "shared_prefixes",
    "step_batches",
    "warm_start_config",
]


def run(config: WarmStartConfig) -> dict[str, Any]:
    """Build the demonstrations, fine-tune, save; returns the summary written to ``warm_start.json``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from trainer.progress import ProgressReporter

    check_inputs(config)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "warm_start_config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    progress = ProgressReporter(out)
    progress.update("load", 0, 0, "loading the base model and the index")
    started = time.perf_counter()

    import torch

    from retrieval.api import searcher_for_index
    from trainer.config import ModelConfig
    from trainer.models import load_policy

    if config.model.torch_threads:
        torch.set_num_threads(config.model.torch_threads)
    torch.manual_seed(config.training.seed)
    model, tokenizer = load_policy(ModelConfig(path=config.model.path), seed=config.training.seed)
    searcher = searcher_for_index(config.index)
    rows = read_rows(config.data.path)
    common = read_rows(COMMON_KNOWLEDGE) if COMMON_KNOWLEDGE.is_file() else []
    plans = choose_plans(config, rows, common)

    examples, counts = demonstration_examples(config, tokenizer, searcher, plans, out, progress)
    if not examples:
        raise ConfigError("data.path", "gave no usable demonstration (see demonstrations.jsonl for why)")
    built = time.perf_counter()

    trained_seconds = _train(config, model, tokenizer, examples, progress)
    progress.update("save", 0, 0, "saving the warm-started model")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    shutil.rmtree(out / "sft", ignore_errors=True)  # the SFTTrainer's own output folder: nothing kept in it
    summary = {
        "base_model": config.model.path,
        "methods": counts,
        "examples": len(examples),
        "demonstration_seconds": round(built - started, 1),
        "train_seconds": round(trained_seconds, 1),
        **({"demo_recipe": config.demo_recipe} if config.demo_recipe else {}),
    }
    (out / "warm_start.json").write_text(json.dumps(summary, indent=2) + "\n")
    progress.update("done", 0, 0, "finished", force=True)
    return summary


def demonstration_examples(
    config: WarmStartConfig,
    tokenizer: Any,
    searcher: Any,
    plans: dict[str, list[Any]],
    out: Path,
    progress: Any,
) -> tuple[list[dict[str, list[int]]], dict[str, dict[str, int]]]:
    """The tokenized demonstrations of every method (written, valid or not, to ``out/demonstrations.jsonl``) and
    their counts per method."""
    from trainer.demonstrations import build_demonstrations

    examples: list[dict[str, list[int]]] = []
    counts: dict[str, dict[str, int]] = {}
    with (out / "demonstrations.jsonl").open("w", encoding="utf-8") as handle:
        for k, method in enumerate(config.methods, start=1):
            progress.update(
                "demonstrate", k, len(config.methods), f"{method}: {len(plans[method])} questions"
            )
            demos = build_demonstrations(
                method,
                plans[method],
                searcher,
                tokenizer,
                max_obs_tokens=config.max_obs_tokens,
                topk=config.topk,
                max_turns=config.max_turns,
                max_turn_tokens=config.max_turn_tokens,
            )
            kept = 0
            for demo in demos:
                example, record = _demonstration_record(config, method, demo, tokenizer)
                kept += record["used"]
                if record["used"]:
                    examples.append(example)
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            counts[method] = {
                "demonstrations": len(demos),
                "valid": sum(d.valid for d in demos),
                "used": kept,
                "no_search": sum(d.valid and d.searches == 0 for d in demos),
            }
    return examples, counts


def _demonstration_record(
    config: WarmStartConfig, method: str, demo: Any, tokenizer: Any
) -> tuple[dict[str, list[int]], dict[str, Any]]:
    """A demonstration tokenized, and its line of ``demonstrations.jsonl``: used when valid and within
    ``training.max_length``, else why not."""
    from trainer.demonstrations import tokenized

    example = tokenized(demo, tokenizer)
    too_long = len(example["input_ids"]) > config.training.max_length
    usable = demo.valid and not too_long
    error = demo.error or (
        f"{len(example['input_ids'])} tokens, over training.max_length ({config.training.max_length})"
        if too_long
        else ""
    )
    record = {
        "method": method,
        "question_id": demo.question_id,
        "searches": demo.searches,
        "redundant": demo.redundant,
        "valid": demo.valid,
        "used": usable,
        "error": error,
        "tokens": len(example["input_ids"]),
        "prompt": demo.prompt,
        "response": demo.rollout.text,
    }
    return example, record


def _train(
    config: WarmStartConfig, model: Any, tokenizer: Any, examples: list[dict[str, list[int]]], progress: Any
) -> float:
    import torch
    from datasets import Dataset  # type: ignore[import-untyped]
    from trl.trainer.sft_trainer import SFTTrainer

    from trainer.callbacks import WarmStartCallback
    from trainer.models import freeze_lower_layers

    t = config.training
    layers = getattr(getattr(model, "model", None), "layers", None)
    on_gpu = torch.cuda.is_available()
    # The frozen-layer cache is a CPU economy (its tensors live on the CPU); a GPU runs TRL's plain SFT path.
    # trainable_layers at or over the layer count trains every layer and the final norm (only the embeddings run once).
    if t.cache_frozen_layers and not on_gpu and layers is not None and t.trainable_layers > 0:
        return train_cached(config, model, examples, progress)
    freeze_lower_layers(model, t.trainable_layers)
    trainer = SFTTrainer(
        model=model,
        args=sft_config(config, on_gpu=on_gpu),
        train_dataset=Dataset.from_list(examples),
        processing_class=tokenizer,
        callbacks=[WarmStartCallback(config.output_dir, progress)],
    )
    started = time.perf_counter()
    trainer.train()
    return time.perf_counter() - started


def sft_config(config: WarmStartConfig, *, on_gpu: bool) -> Any:
    """TRL's SFT arguments of the plain path. On the GPU when there is one: a hard-coded ``use_cpu=True`` once
    sent a GPU machine's warm start to its CPU, and a test checks both ways."""
    from trl.trainer.sft_config import SFTConfig

    t = config.training
    return SFTConfig(
        output_dir=str(Path(config.output_dir) / "sft"),
        num_train_epochs=t.epochs,
        learning_rate=t.learning_rate,
        per_device_train_batch_size=t.batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        max_length=t.max_length,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        bf16=False,
        fp16=False,
        use_cpu=not on_gpu,
        seed=t.seed,
        data_seed=t.seed,
        lr_scheduler_type="cosine",
        warmup_steps=2,
        # Micro-batches of similar lengths (HiPRAG's demonstrations are ~850 tokens, Search-R1's ~510): padding a
        # mixed batch to its longest row wasted about a quarter of every forward and backward pass.
        train_sampling_strategy="group_by_length",
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.warm_start", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("config", nargs="?", help="a .toml, .json or .yaml warm-start config")
    parser.add_argument("--help-config", action="store_true", help="list every config field and exit")
    args = parser.parse_args(argv)
    from trainer.stop import listen_for_stop

    listen_for_stop()
    if args.help_config:
        from trainer.config import describe

        print(describe(WarmStartConfig))
        return 0
    if not args.config:
        parser.error("CONFIG is required")
    try:
        summary = run(load_warm_start_config(args.config))
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
