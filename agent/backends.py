"""Generation backends: what the rollouts and the policy-side detectors call to continue text.

Three implementations, each in its own module and imported only when configured (``import agent`` never imports
torch, transformers, openai or vllm):

* :class:`agent.backend_transformers.TransformersBackend` — in-process, CPU default (SmolLM2-135M-Instruct);
* :class:`agent.backend_openai.OpenAICompletionsBackend` — any OpenAI-compatible server (vLLM, OpenAI) through
  ``openai.AsyncOpenAI``'s completions endpoint;
* :class:`agent.backend_vllm.VLLMBackend` — ``vllm.LLM`` in-process, when vLLM is installed (GPU).

Contract of :meth:`GenerationBackend.generate` (one call = one batch, one :class:`Generation` per prompt, in order):

* generation stops at the first of ``stop`` (the method's boundary tags), at the end-of-sequence token, or after
  ``max_new_tokens``; the stop string is KEPT at the end of ``text`` (the rollouts need to know which boundary was
  hit, and the trajectory text must contain the tag). ``stop_reason`` names the stop string that ended it.
* ``text`` is what the model wrote, the end-of-sequence token excluded. When ``token_ids`` is given (the
  transformers and vLLM backends), ``text == tokenizer.decode(token_ids)``: the cut at a stop string is made at a
  token boundary, so a token that straddles the tag keeps its few extra characters rather than be re-tokenised
  (the trainer builds ``env_mask`` from these ids; REFERENCE.md §c re-tokenises instead, which we avoid on purpose).
* ``temperature == 0`` means greedy; ``seed`` makes sampling reproducible where the backend allows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

FinishReason = Literal["stop", "eos", "length"]
Message = dict[str, str]

# ChatML, the chat layout of Qwen2.5 and SmolLM2: used when a backend has no tokenizer to ask for its template.
CHATML_START = "<|im_start|>"
CHATML_END = "<|im_end|>"


@dataclass(frozen=True, slots=True)
class Generation:
    text: str
    finish_reason: FinishReason
    stop_reason: str | None = None  # the stop string that ended the generation (finish_reason == "stop")
    token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None  # log-probability of each token of token_ids, as sampled
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True, slots=True)
class SamplingParams:
    max_new_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None


@runtime_checkable
class GenerationBackend(Protocol):
    """A policy model that continues raw text (the rollout applies the chat template itself)."""

    name: str

    def generate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]: ...

    def apply_chat_template(self, messages: Sequence[Message]) -> str:
        """The messages in the model's chat layout, ready for the assistant's turn."""
        ...

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        """``text`` cut to at most ``max_tokens`` tokens (observations are bounded in tokens, REFERENCE.md §c)."""
        ...


def chatml(messages: Sequence[Message]) -> str:
    """ChatML layout with the generation prompt (``add_generation_prompt=True``)."""
    turns = "".join(f"{CHATML_START}{m['role']}\n{m['content']}{CHATML_END}\n" for m in messages)
    return f"{turns}{CHATML_START}assistant\n"


def first_stop(text: str, stop: Sequence[str]) -> tuple[int, str] | None:
    """``(end offset, stop string)`` of the earliest stop string in ``text`` (ties: the longer string)."""
    hits = [(text.find(s), -len(s), s) for s in stop if s and s in text]
    if not hits:
        return None
    at, _, found = min(hits)
    return at + len(found), found


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, str | None]:
    """``text`` up to and including its first stop string, and that string (``None`` when there is none)."""
    found = first_stop(text, stop)
    if found is None:
        return text, None
    return text[: found[0]], found[1]


@dataclass(frozen=True, slots=True)
class BackendConfig:
    """How to build a policy backend (a Run's config holds this as JSON).

    ``kind``: ``transformers`` (``model`` is a local folder), ``openai`` (``base_url`` + ``model``, the key read
    from the environment variable NAMED ``api_key_env``), or ``vllm`` (``model`` is a local folder or name vLLM
    can load offline).
    """

    kind: Literal["transformers", "openai", "vllm"] = "transformers"
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    tokenizer: str | None = None  # a local tokenizer folder for the chat template of a remote model
    threads: int = 2
    concurrency: int = 16
    timeout: float = 120.0
    extra: dict[str, Any] = field(default_factory=dict)


def make_backend(config: BackendConfig) -> GenerationBackend:
    """Build the configured backend; the heavy libraries are imported here, not at ``import agent``."""
    if config.kind == "transformers":
        from agent.backend_transformers import TransformersBackend

        return TransformersBackend.from_pretrained(config.model, threads=config.threads)
    if config.kind == "openai":
        from agent.backend_openai import OpenAICompletionsBackend

        if not config.base_url:
            raise ValueError("an openai backend needs base_url")
        return OpenAICompletionsBackend(
            base_url=config.base_url,
            model=config.model,
            api_key_env=config.api_key_env,
            tokenizer=config.tokenizer,
            concurrency=config.concurrency,
            timeout=config.timeout,
        )
    if config.kind == "vllm":
        from agent.backend_vllm import VLLMBackend

        return VLLMBackend(config.model, **config.extra)
    raise ValueError(f"unknown backend kind {config.kind!r}")
