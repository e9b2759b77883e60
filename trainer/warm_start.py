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
import random
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.budgets import BudgetError, RolloutBudgets, budget_field
from trainer.config import METHODS, ConfigError, _build, _help

ALL_METHODS = list(METHODS)
COMMON_KNOWLEDGE = Path(__file__).resolve().parent.parent / "demo" / "common_knowledge.jsonl"


@dataclass
class WarmStartModel:
    path: str = field(default="", metadata=_help("The base policy: a transformers model folder."))
    torch_threads: int = field(default=2, metadata=_help("torch threads on the CPU (2 on a 2-core box)."))


@dataclass
class WarmStartData:
    path: str = field(
        default="",
        metadata=_help(
            "FlashRAG questions whose metadata has supporting_titles (e.g. wiki_multihop's questions.jsonl)."
        ),
    )
    split: str = field(
        default="train",
        metadata=_help(
            "Use rows whose metadata.split starts with this ('' = all); keep evaluation questions out."
        ),
    )
    questions_per_method: int = field(default=48, metadata=_help("Search demonstrations per method."))
    no_search_share: float = field(
        default=0.15,
        metadata=_help(
            "Share of no-search demonstrations (single-hop common knowledge: the file's own rows so marked, "
            "plus demo/common_knowledge.jsonl)."
        ),
    )
    redundant_search_share: float = field(
        default=0.0,
        metadata=_help(
            "Share of search demonstrations given one redundant search after the needed ones (repeating the first "
            "query, or asking for what the first passage already gave): the controlled test of a process reward. "
            "Needs max_turns ≥ hops + 2 and a run budget with room for the extra search (max_rollout_tokens)."
        ),
    )


@dataclass
class WarmStartTraining:
    epochs: float = field(default=3.0, metadata=_help("Passes over the demonstrations."))
    learning_rate: float = field(
        default=3e-4,
        metadata=_help(
            "AdamW learning rate. The alignment-handbook's SFT recipe for SmolLM2-135M/360M uses 1e-3 (3e-4 noted "
            "beside it); 8e-5 left the demo model looping after 20 steps (docs/warm_start.md)."
        ),
    )
    batch_size: int = field(default=4, metadata=_help("Demonstrations per micro-batch."))
    gradient_accumulation_steps: int = field(default=2, metadata=_help("Micro-batches per optimizer step."))
    max_length: int = field(
        default=1024, metadata=_help("Tokens per demonstration (longer ones are dropped).")
    )
    seed: int = field(default=0, metadata=_help("Seed of the question sample, data order and torch."))
    trainable_layers: int = field(
        default=10,
        metadata=_help(
            "Train only the top N transformer layers and the final norm (0: every weight). The format is learnt in "
            "the top layers; the backward pass then stops there, about 1.8× less compute on a CPU."
        ),
    )
    cache_frozen_layers: bool = field(
        default=True,
        metadata=_help(
            "With trainable_layers: run the frozen bottom layers once per demonstration and train the top ones on "
            "their stored output, the LM head only where the loss is (the model's own tokens). The same updates "
            "as TRL's SFTTrainer over the whole model (false), for a fraction of the compute (docs/warm_start.md)."
        ),
    )


@dataclass(kw_only=True)
class WarmStartConfig(RolloutBudgets):
    """A warm start: its budgets (:class:`agent.budgets.RolloutBudgets`, top-level keys ``max_turns`` …, as the
    runs it prepares will use them), the base model, the questions and the supervised training."""

    output_dir: str = field(metadata=_help("The warm-started model and its files go here."))
    index: str = field(default="", metadata=_help("The retrieval index folder the demonstrations search."))
    methods: list[str] = field(
        default_factory=lambda: list(ALL_METHODS), metadata=_help("The formats to teach (one model for all).")
    )
    # The budgets of the runs this warm start prepares (agent.budgets.RolloutBudgets): the demonstrations search
    # with max_obs_tokens and topk, fewer times than max_turns (the answer needs a turn), and one with a model turn
    # over max_turn_tokens is left out (the runs' budget would cut it).
    max_rollout_tokens: int = field(
        default=512,
        metadata={
            **budget_field("max_rollout_tokens").metadata,
            "help": "Tokens per rollout of the runs this warm start prepares (the demo's: 512). Checked, with a "
            "redundant search, to leave room for one search more (agent.rollout.room_for_another_search): 764 at "
            "the demo's 64 tokens per turn and 100 retrieved tokens; give the runs the same budget.",
        },
    )
    model: WarmStartModel = field(default_factory=WarmStartModel)
    data: WarmStartData = field(default_factory=WarmStartData)
    training: WarmStartTraining = field(default_factory=WarmStartTraining)
    demo_recipe: int = field(
        default=0,
        metadata=_help(
            "The demo's warm model only: its recipe (trainer.warm_start.DEMO_RECIPE), written into warm_start.json "
            "so an older one is rebuilt (0: not the demo's)."
        ),
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validate(self) -> WarmStartConfig:
        if not self.model.path:
            raise ConfigError("model.path", "is required (the base policy folder)")
        if not self.index:
            raise ConfigError("index", "is required (the demonstrations search a real index)")
        if not self.data.path:
            raise ConfigError("data.path", "is required (questions with metadata.supporting_titles)")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ConfigError(
                "methods", f"must be a non-empty list of {', '.join(METHODS)}; got {self.methods!r}"
            )
        if not 0.0 <= self.data.redundant_search_share <= 1.0:
            raise ConfigError(
                "data.redundant_search_share", f"must lie in [0, 1], got {self.data.redundant_search_share!r}"
            )
        if self.data.redundant_search_share:
            if self.max_turns < 4:
                raise ConfigError(
                    "max_turns",
                    f"must be ≥ 4 with redundant searches (two needed searches, the redundant one, the answer); got "
                    f"{self.max_turns}",
                )
            need = rollout_tokens_for(3, self.max_turn_tokens, self.max_obs_tokens)
            if self.max_rollout_tokens < need:
                raise ConfigError(
                    "max_rollout_tokens",
                    f"must be ≥ {need} with redundant searches: at {self.max_rollout_tokens} tokens a rollout, "
                    "agent.rollout.room_for_another_search sends a rollout to its answer before a third search "
                    "(give the runs this budget too)",
                )
        if not 0.0 <= self.data.no_search_share < 1.0:
            raise ConfigError(
                "data.no_search_share", f"must lie in [0, 1), got {self.data.no_search_share!r}"
            )
        try:
            self.check()
        except BudgetError as exc:
            raise ConfigError(exc.field, exc.message) from None
        for name, value in (
            ("data.questions_per_method", self.data.questions_per_method),
            ("training.batch_size", self.training.batch_size),
            ("training.gradient_accumulation_steps", self.training.gradient_accumulation_steps),
            ("training.max_length", self.training.max_length),
            ("max_turns", self.max_turns),  # a demonstration's searches leave its answer a turn
        ):
            if value < 1:
                raise ConfigError(name, f"must be ≥ 1, got {value!r}")
        for name, number in (
            ("training.epochs", self.training.epochs),
            ("training.learning_rate", self.training.learning_rate),
        ):
            if not number > 0:
                raise ConfigError(name, f"must be > 0, got {number!r}")
        return self


def rollout_tokens_for(searches: int, max_turn_tokens: int, max_obs_tokens: int) -> int:
    """The tokens per rollout with which ``agent.rollout.room_for_another_search`` lets every method make
    ``searches`` searches even when each model turn fills its budget: before each search after the first, what is
    left must hold a full turn, the passages and their wrapper, the turn after it and an answer; each search before
    spends a turn, its passages and a conclusion turn (HiPRAG's step)."""
    from agent.rollout import ANSWER_TOKENS, SEARCH_WRAPPER_TOKENS

    step = 2 * max_turn_tokens + max_obs_tokens + SEARCH_WRAPPER_TOKENS
    return searches * step + ANSWER_TOKENS


def check_inputs(config: WarmStartConfig) -> None:
    """The files a run reads exist (checked when it starts: the web app validates a config before its question file
    is exported)."""
    if not Path(config.data.path).is_file():
        raise ConfigError("data.path", f"{config.data.path} is not a file")
    if not Path(config.index).is_dir():
        raise ConfigError(
            "index", f"{config.index} is not an index folder (retrieval.index.build_index makes one)"
        )


def warm_start_config(values: dict[str, Any]) -> WarmStartConfig:
    config: WarmStartConfig = _build(WarmStartConfig, values, "")
    return config.validate()


def load_warm_start_config(path: str | Path) -> WarmStartConfig:
    from trainer.config import load_config_values

    return warm_start_config(load_config_values(path))


# --- data ------------------------------------------------------------------------------------------------------


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """FlashRAG question rows; a bad line is an error naming the file and line."""
    rows = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                for required in ("question", "golden_answers"):
                    if required not in row:
                        raise KeyError(required)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ConfigError(
                    "data.path", f"{path}:{number}: not a FlashRAG question row ({exc})"
                ) from None
            rows.append(row)
    return rows


def choose_plans(
    config: WarmStartConfig, rows: Sequence[dict[str, Any]], common: Sequence[dict[str, Any]]
) -> dict[str, list[Any]]:
    """Per method: ``questions_per_method`` search plans and their share of no-search plans, drawn with the seed
    from disjoint questions (a question teaches one method, so more questions are seen)."""
    from trainer.demonstrations import needs_search, plan_for

    split = config.data.split
    chosen = [
        r for r in rows if not split or str((r.get("metadata") or {}).get("split", "")).startswith(split)
    ]
    searched = [
        p
        for r in chosen
        if needs_search(r) and (p := plan_for(r)) is not None and 0 < len(p.hops) < config.max_turns
    ]
    direct = [p for r in [*chosen, *common] if not needs_search(r) and (p := plan_for(r)) is not None]
    rng = random.Random(config.training.seed)
    rng.shuffle(searched)
    rng.shuffle(direct)
    share = config.data.no_search_share
    n_direct = max(1, round(config.data.questions_per_method * share / (1 - share))) if share else 0
    plans: dict[str, list[Any]] = {}
    for i, method in enumerate(config.methods):
        mine = searched[i * config.data.questions_per_method : (i + 1) * config.data.questions_per_method]
        if len(mine) < config.data.questions_per_method:
            mine = searched[
                : config.data.questions_per_method
            ]  # fewer questions than methods × N: share them
        # No-search questions are few: every method sees them (rotated so each gets a different first few).
        extra = (
            [direct[(i * n_direct + j) % len(direct)] for j in range(min(n_direct, len(direct)))]
            if direct
            else []
        )
        plans[method] = [*_with_redundant(config, mine, rng), *extra]
    return plans


def _with_redundant(config: WarmStartConfig, plans: list[Any], rng: random.Random) -> list[Any]:
    """``data.redundant_search_share`` of ``plans`` (a seeded choice among those whose turn budget has room for one
    search more) given a redundant last search, the two kinds taking turns."""
    from trainer.demonstrations import REDUNDANT_KINDS, with_redundant_search

    share = config.data.redundant_search_share
    room = [i for i, p in enumerate(plans) if len(p.hops) + 1 < config.max_turns]
    if not share or not room:
        return list(plans)
    chosen = sorted(rng.sample(room, min(len(room), round(share * len(plans)))))
    out = list(plans)
    for n, i in enumerate(chosen):
        out[i] = with_redundant_search(plans[i], REDUNDANT_KINDS[n % len(REDUNDANT_KINDS)])
    return out


# --- training --------------------------------------------------------------------------------------------------


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
    from trainer.demonstrations import build_demonstrations, tokenized

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
                example = tokenized(demo, tokenizer)
                too_long = len(example["input_ids"]) > config.training.max_length
                usable = demo.valid and not too_long
                kept += usable
                error = demo.error or (
                    f"{len(example['input_ids'])} tokens, over training.max_length "
                    f"({config.training.max_length})"
                    if too_long
                    else ""
                )
                if usable:
                    examples.append(example)
                handle.write(
                    json.dumps(
                        {
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
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
            counts[method] = {
                "demonstrations": len(demos),
                "valid": sum(d.valid for d in demos),
                "used": kept,
                "no_search": sum(d.valid and d.searches == 0 for d in demos),
            }
    return examples, counts


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
        return _train_cached(config, model, examples, progress)
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


def step_batches(n_examples: int, per_step: int, epochs: float, seed: int) -> list[list[int]]:
    """The demonstrations of each optimizer step: every epoch a fresh seeded shuffle cut into steps of
    ``per_step`` (the last one of an epoch may be smaller); a fractional epoch count keeps the first steps of its
    last epoch."""
    rng = random.Random(seed)
    per_epoch = max(1, -(-n_examples // per_step))
    total = max(1, round(epochs * per_epoch))
    steps: list[list[int]] = []
    while len(steps) < total:
        order = list(range(n_examples))
        rng.shuffle(order)
        steps.extend(order[i : i + per_step] for i in range(0, n_examples, per_step))
    return steps[:total]


def shared_prefixes(examples: Sequence[dict[str, list[int]]], *, key_tokens: int = 32) -> list[int]:
    """Per demonstration, how many of its first tokens it shares with every other demonstration of its group (those
    that start with the same ``key_tokens`` tokens: one method's prompt), never reaching the token before its
    first trained one; 0 for a demonstration alone in its group. HiPRAG's ~420-token instructions are such a
    prefix, Search-R1's ~130."""
    first = [next((j for j, y in enumerate(e["labels"]) if y != -100), len(e["labels"])) for e in examples]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, example in enumerate(examples):
        groups.setdefault(tuple(example["input_ids"][:key_tokens]), []).append(i)
    out = [0] * len(examples)
    for members in groups.values():
        if len(members) < 2:
            continue
        rows = [examples[i]["input_ids"] for i in members]
        limit = min(first[i] - 1 for i in members)
        n = 0
        while n < limit and all(row[n] == rows[0][n] for row in rows):
            n += 1
        for i in members:
            out[i] = n
    return out


@contextmanager
def _only(inner: Any, layers: Sequence[Any], *, norm: bool) -> Iterator[None]:
    """``inner`` (a decoder stack) runs ``layers`` only, re-indexed from 0 for its key/value cache, with or without
    its final norm."""
    import torch

    saved_layers, saved_norm = inner.layers, inner.norm
    indexes = [layer.self_attn.layer_idx for layer in layers]
    inner.layers = torch.nn.ModuleList(layers)
    if not norm:
        inner.norm = torch.nn.Identity()
    for j, layer in enumerate(layers):
        layer.self_attn.layer_idx = j
    try:
        yield
    finally:
        for layer, index in zip(layers, indexes, strict=True):
            layer.self_attn.layer_idx = index
        inner.layers, inner.norm = saved_layers, saved_norm


def _train_cached(
    config: WarmStartConfig, model: Any, examples: list[dict[str, list[int]]], progress: Any
) -> float:
    """Supervised training of the top ``trainable_layers`` on the frozen bottom layers' output, computed once.

    - The frozen layers give the same activations every epoch (no dropout in SmolLM2, weights unchanged), so they
      run once per demonstration, without autograd, and the epochs start from their stored output.
    - The prompt prefix a method's demonstrations share (:func:`shared_prefixes`) runs once: through the frozen
      layers once in all, through the trained ones once per optimizer step (its keys and values, with their
      gradient, serve every demonstration of the step that shares it).
    - The LM head and its softmax run only at the positions whose next token is the model's own (the loss's), not
      at the prompt's and the passages' (~80% of a demonstration).
    - One demonstration per forward pass: no padding.

    The loss is the mean over the step's model tokens, the optimizer AdamW with a cosine schedule and 2 warm-up
    steps, gradients clipped at norm 1: the updates of TRL's SFTTrainer with the same settings
    (``cache_frozen_layers = false``), for a fraction of the compute (a test checks the weights against a plain
    loop over the whole model)."""
    import math

    import torch
    from torch.nn import functional
    from transformers import get_cosine_schedule_with_warmup
    from transformers.cache_utils import DynamicCache

    from trainer.callbacks import METRICS_FILE
    from trainer.models import freeze_lower_layers

    t = config.training
    inner = model.model
    layers = list(inner.layers)
    # split 0: every layer trains, and only the embeddings (frozen) are computed once
    split = max(0, len(layers) - t.trainable_layers)
    bottom, top = layers[:split], layers[split:]
    freeze_lower_layers(model, t.trainable_layers)
    started = time.perf_counter()
    prefix = shared_prefixes(examples)
    keys = [tuple(e["input_ids"][:n]) for e, n in zip(examples, prefix, strict=True)]
    prefix_hidden: dict[tuple[int, ...], Any] = {}
    suffix_hidden: list[Any] = []
    model.eval()
    with torch.no_grad(), _only(inner, bottom, norm=False):
        bottom_kv: dict[tuple[int, ...], list[tuple[Any, Any]]] = {}
        for key in dict.fromkeys(k for k in keys if k):
            out = inner(input_ids=torch.tensor([key]), use_cache=True)
            prefix_hidden[key] = out.last_hidden_state
            bottom_kv[key] = [
                (layer.keys, layer.values) for layer in out.past_key_values.layers[: len(bottom)]
            ]
        for i, example in enumerate(examples):
            progress.update(
                "train", i, len(examples), "the frozen layers, once per demonstration", force=i == 0
            )
            n = prefix[i]
            ids = torch.tensor([example["input_ids"][n:]])
            past = DynamicCache(ddp_cache_data=bottom_kv[keys[i]]) if n else None
            positions = torch.arange(n, n + ids.shape[1])[None]
            out = inner(
                input_ids=ids, past_key_values=past, position_ids=positions, use_cache=past is not None
            )
            suffix_hidden.append(out.last_hidden_state.clone())
    del bottom_kv
    targets = [torch.tensor(e["labels"][1:]) for e in examples]
    keep = [(y != -100).nonzero().squeeze(1) for y in targets]
    steps = step_batches(len(examples), t.batch_size * t.gradient_accumulation_steps, t.epochs, t.seed)
    per_epoch = max(1, -(-len(examples) // (t.batch_size * t.gradient_accumulation_steps)))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=t.learning_rate, weight_decay=0.0)
    schedule = get_cosine_schedule_with_warmup(optimizer, min(2, len(steps)), len(steps))
    metrics = Path(config.output_dir) / METRICS_FILE
    model.train()
    with _only(inner, top, norm=True):
        for number, batch in enumerate(steps, start=1):
            progress.begin_step(number, len(steps), "train", "supervised warm start")
            tokens = sum(len(keep[i]) for i in batch) or 1
            total = 0.0
            groups: dict[tuple[int, ...], list[int]] = {}
            for i in batch:
                groups.setdefault(keys[i], []).append(i)
            for key, members in groups.items():
                top_kv = None
                if key:  # the shared prefix through the trained layers once, for every member
                    out = inner(inputs_embeds=prefix_hidden[key], use_cache=True)
                    top_kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers[: len(top)]]
                group_loss = None
                for i in members:
                    n = prefix[i]
                    past = DynamicCache(ddp_cache_data=top_kv) if top_kv is not None else None
                    positions = torch.arange(n, n + suffix_hidden[i].shape[1])[None]
                    logits = model(
                        inputs_embeds=suffix_hidden[i],
                        past_key_values=past,
                        position_ids=positions,
                        use_cache=past is not None,
                        logits_to_keep=keep[i] - n,
                    ).logits[0]
                    loss = functional.cross_entropy(logits.float(), targets[i][keep[i]], reduction="sum")
                    total += float(loss.detach())
                    group_loss = loss if group_loss is None else group_loss + loss
                assert group_loss is not None
                (group_loss / tokens).backward()  # type: ignore[no-untyped-call]
            learning_rate = schedule.get_last_lr()[0]
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, 1.0))
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            values = {
                "loss": total / tokens,
                "learning_rate": learning_rate,
                "grad_norm": grad_norm,
                "epoch": number / per_epoch,
            }
            now = time.time()
            with metrics.open("a", encoding="utf-8") as handle:
                handle.writelines(
                    json.dumps({"step": number, "time": now, "key": key, "value": value}) + "\n"
                    for key, value in values.items()
                    if math.isfinite(value)
                )
            progress.end_step(next_phase="train")
    model.eval()
    return time.perf_counter() - started


# --- the demo's cached warm start -------------------------------------------------------------------------------


WARM_MODEL_NAME = "SmolLM2-135M-Instruct-warm"
DEMO_METHODS = ("hiprag", "search_r1")
# The recipe of the demo's warm model: bumped whenever the demonstrations or the demo's warm-start settings change,
# so a model cached by an older recipe is rebuilt instead of reused. 1: 30-word conclusions (format-ok 0.850).
# 2: conclusions of at most 14 words from the hop's own passage, no model turn over the 64-token turn budget
# (HiPRAG 0.950, Search-R1 0.525). 3: Search-R1's turns say where the plan stands; the cached trainer (frozen
# layers and shared prompt prefixes once, the LM head on the model's tokens only) with the top 6 layers trained
# at 5e-4 (HiPRAG 0.825, Search-R1 0.450). 4: Search-R1's turns count their searches ("Search 1 of 2"); the
# cached trainer on the top 8 layers at 4e-4 (HiPRAG 0.950, Search-R1 0.475; docs/warm_start.md has the figures).
# 5: every decoder layer (30 is SmolLM2's count; at or over a model's count it means all of them, the embeddings
# frozen) through the cached trainer, 2 epochs at 4e-4: Search-R1's format needs the lower layers (top 8: 0.475;
# all 30: 0.800-0.900 over 2, 2.5 and 3 epochs), and 2 epochs put its cost at 0.31 of recipe 2's (3: 0.45)
# (HiPRAG 1.000, Search-R1 0.875; 0.700 with seed 1: not yet robust). 6: Search-R1's conclusions of at most 8
# words (trainer.demonstrations.SEARCH_R1_CONCLUSION_WORDS), so its turns fit the 64-token turn budget with room to
# spare and 53-55 of its 56 demonstrations are kept instead of 47-50 (HiPRAG 1.000; Search-R1 0.925, 0.975, 0.975
# with seeds 0, 1, 2, where recipe 5 gave 0.875, 0.700, 0.750).
DEMO_RECIPE = 6
# The demo's data and training settings beyond the defaults.
DEMO_DATA: dict[str, Any] = {}
DEMO_TRAINING: dict[str, Any] = {"trainable_layers": 30, "learning_rate": 4e-4, "epochs": 2.0}


def demo_warm_model_recipe(target: Path) -> int | None:
    """The recipe a finished demo warm model was built with (1 for one from before recipes were recorded), or
    ``None`` when ``target`` holds no finished model."""
    summary = target / "warm_start.json"
    if not (summary.is_file() and (target / "config.json").is_file()):
        return None
    try:
        return int(json.loads(summary.read_text(encoding="utf-8")).get("demo_recipe", 1))
    except (ValueError, TypeError, AttributeError):
        return None


def demo_warm_start_values(
    var_dir: Path, shared_dir: Path | None, *, base: Path | None = None
) -> dict[str, Any]:
    """The config of the demo's warm start (recipe :data:`DEMO_RECIPE`) into ``var_dir/models``.

    Demonstrations come from wiki_multihop's train questions and a BM25 index of its corpus (built here in seconds
    when missing, cached under ``var_dir/retrieval/indexes``) when ``shared_dir`` has them, else from the demo's
    own corpus and questions.
    """
    from retrieval.index import IndexConfig, build_index

    base = base or var_dir / "models" / "SmolLM2-135M-Instruct"
    wiki = shared_dir / "data" / "wiki_multihop" if shared_dir else None
    if wiki and (wiki / "corpus.jsonl").is_file() and (wiki / "questions.jsonl").is_file():
        corpus, questions, name = wiki / "corpus.jsonl", wiki / "questions.jsonl", "wiki_multihop-bm25"
        split = "train"
    else:
        demo = Path(__file__).resolve().parent.parent / "demo"
        corpus, questions, name, split = demo / "corpus.jsonl", demo / "questions.jsonl", "demo-bm25", ""
    index = var_dir / "retrieval" / "indexes" / name
    if not (index / "metadata.json").is_file():
        build_index(corpus, index, IndexConfig(kind="bm25"))
    return {
        "output_dir": str(var_dir / "models" / WARM_MODEL_NAME),
        "index": str(index),
        "model": {"path": str(base)},
        "data": {"path": str(questions), "split": split, **DEMO_DATA},
        # The demo trains HiPRAG against its Search-R1 baseline; each method more costs more minutes.
        "methods": list(DEMO_METHODS),
        "training": dict(DEMO_TRAINING),
        "demo_recipe": DEMO_RECIPE,
    }


def ensure_demo_warm_model(var_dir: Path, shared_dir: Path | None, *, base: Path | None = None) -> Path:
    """The demo's warm-started SmolLM2 under ``var_dir/models``, made once in this process (a finished folder of
    the current :data:`DEMO_RECIPE` is reused; one of an older recipe is rebuilt in place). ``manage.py demo``
    runs the same config as a warm-start run beside the web server instead."""
    target = var_dir / "models" / WARM_MODEL_NAME
    if demo_warm_model_recipe(target) == DEMO_RECIPE:
        return target
    run(warm_start_config(demo_warm_start_values(var_dir, shared_dir, base=base)))
    return target


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
