"""Loading the policy and its tokenizer, offline; the tiny random model tests and benchmarks use; LoRA settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

from trainer.config import TINY_MODEL, ConfigError, ModelConfig


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer built offline: one token per byte (lossless on any text) plus ``<pad>`` and ``<eos>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {char: i for i, char in enumerate(alphabet)}
    vocab["<pad>"] = len(vocab)
    vocab["<eos>"] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>"
    )


def tiny_model(
    tokenizer: PreTrainedTokenizerFast, *, hidden: int = 32, layers: int = 2, seed: int = 0
) -> LlamaForCausalLM:
    """A random Llama small enough to train a step in well under a second on a CPU."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)  # type: ignore[no-untyped-call]  # untyped in transformers 5.19


def load_policy(config: ModelConfig, *, seed: int = 0) -> tuple[PreTrainedModel, Any]:
    """The policy and its tokenizer, from a local folder only (``local_files_only``: never a model hub)."""
    if config.path == TINY_MODEL:
        tiny = tiny_tokenizer()
        return tiny_model(tiny, seed=seed), tiny
    path = Path(config.path)
    if not (path / "config.json").is_file():
        raise ConfigError(
            "model.path",
            f"{path} is not a transformers model folder (no config.json); run `python -m agent.setup_model` for "
            f"the default SmolLM2, or use {TINY_MODEL!r}",
        )
    dtype = torch.bfloat16 if config.dtype == "bfloat16" else torch.float32
    tokenizer: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
    return model, tokenizer


def lora_config(config: ModelConfig) -> Any:
    """A peft ``LoraConfig`` when ``model.lora`` is on, else ``None`` (TRL wraps the policy with it)."""
    if not config.lora:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        task_type="CAUSAL_LM",
    )


def freeze_lower_layers(model: Any, trainable: int) -> None:
    """Train only the top ``trainable`` decoder layers and the final norm: freeze the embeddings (tied to the LM
    head in SmolLM2) and every layer below. The backward pass then stops at the lowest trainable layer — about
    1.8× less compute with 10 of SmolLM2's 30 layers — which is what makes a CPU step short. 0: train everything;
    the number of layers or more: every layer and the final norm, the embeddings frozen."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not trainable or layers is None:
        return
    model.model.embed_tokens.requires_grad_(False)
    for layer in list(layers)[: len(layers) - trainable]:
        layer.requires_grad_(False)
