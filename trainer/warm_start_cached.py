"""The warm start's cached trainer (``training.cache_frozen_layers``, on a CPU): the frozen bottom layers run once.

:func:`train_cached` makes the updates of TRL's SFTTrainer with the same settings (``cache_frozen_layers = false``:
:func:`trainer.warm_start._train`) for a fraction of the compute; ``tests/trainer/test_warm_start.py`` checks the
weights against a plain loop over the whole model.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.warm_start_config import WarmStartConfig


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


@dataclass
class _Cached:
    """What the frozen pass leaves for training: per demonstration its shared-prefix length and key (the prefix's
    tokens), the bottom layers' output of its own tokens, its targets and the positions the loss reads; per shared
    prefix the bottom layers' output."""

    prefix: list[int]
    keys: list[tuple[int, ...]]
    prefix_hidden: dict[tuple[int, ...], Any]
    suffix_hidden: list[Any]
    targets: list[Any]
    keep: list[Any]


def _frozen_pass(
    inner: Any, bottom: Sequence[Any], examples: list[dict[str, list[int]]], progress: Any
) -> _Cached:
    """Every shared prompt prefix, then every demonstration's own tokens after it, through the frozen layers once,
    without autograd."""
    import torch
    from transformers.cache_utils import DynamicCache

    prefix = shared_prefixes(examples)
    keys = [tuple(e["input_ids"][:n]) for e, n in zip(examples, prefix, strict=True)]
    prefix_hidden: dict[tuple[int, ...], Any] = {}
    suffix_hidden: list[Any] = []
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
    return _Cached(prefix, keys, prefix_hidden, suffix_hidden, targets, keep)


def _step_backward(
    model: Any, inner: Any, top: Sequence[Any], batch: Sequence[int], cached: _Cached
) -> tuple[float, int]:
    """One optimizer step's gradients: each shared prefix through the trained layers once (its keys and values,
    with their gradient, serve every member of the step that shares it), then each member's loss at its model
    tokens; the sum of losses is divided by the step's model tokens. Returns the summed loss and that count."""
    import torch
    from torch.nn import functional
    from transformers.cache_utils import DynamicCache

    c = cached
    tokens = sum(len(c.keep[i]) for i in batch) or 1
    total = 0.0
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in batch:
        groups.setdefault(c.keys[i], []).append(i)
    for key, members in groups.items():
        top_kv = None
        if key:  # the shared prefix through the trained layers once, for every member
            out = inner(inputs_embeds=c.prefix_hidden[key], use_cache=True)
            top_kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers[: len(top)]]
        group_loss = None
        for i in members:
            n = c.prefix[i]
            past = DynamicCache(ddp_cache_data=top_kv) if top_kv is not None else None
            positions = torch.arange(n, n + c.suffix_hidden[i].shape[1])[None]
            logits = model(
                inputs_embeds=c.suffix_hidden[i],
                past_key_values=past,
                position_ids=positions,
                use_cache=past is not None,
                logits_to_keep=c.keep[i] - n,
            ).logits[0]
            loss = functional.cross_entropy(logits.float(), c.targets[i][c.keep[i]], reduction="sum")
            total += float(loss.detach())
            group_loss = loss if group_loss is None else group_loss + loss
        assert group_loss is not None
        (group_loss / tokens).backward()  # type: ignore[no-untyped-call]
    return total, tokens


def _write_metrics(path: Path, step: int, values: dict[str, float]) -> None:
    """A step's finite values appended to ``metrics.jsonl`` as trainer.callbacks writes them."""
    now = time.time()
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(
            json.dumps({"step": step, "time": now, "key": key, "value": value}) + "\n"
            for key, value in values.items()
            if math.isfinite(value)
        )


def train_cached(
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
    loop over the whole model). Returns the seconds it took."""
    import torch
    from transformers import get_cosine_schedule_with_warmup

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
    model.eval()
    cached = _frozen_pass(inner, bottom, examples, progress)
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
            total, tokens = _step_backward(model, inner, top, batch, cached)
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
            _write_metrics(metrics, number, values)
            progress.end_step(next_phase="train")
    model.eval()
    return time.perf_counter() - started
