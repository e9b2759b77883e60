"""A policy served by any OpenAI-compatible server (vLLM, OpenAI): the completions endpoint with ``stop``.

Multi-turn rollouts continue raw text (the environment inserts observations mid-response), so the policy uses
``/v1/completions``, not the chat endpoint; the rollout applies the chat template itself — from a local tokenizer
folder when one is configured, else ChatML (Qwen2.5's and SmolLM2's layout).

Servers drop the stop string from the text they return. vLLM is asked to keep it
(``include_stop_str_in_output``); a server that ignores the request but says which string stopped it
(vLLM's ``stop_reason``) gets it appended back; a server that says neither returns the text as is, with
``stop_reason`` unknown. The API key is read from the environment variable whose NAME is configured, when the
backend is built, and is never stored on this object, shown or logged.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from agent.backends import Generation, Message, chatml, cut_at_stop

_CHARS_PER_TOKEN = 4  # without a tokenizer, observations are bounded by this many characters per token


def read_api_key(api_key_env: str | None) -> str:
    """The key from the environment variable named ``api_key_env``; a local server without auth gets a dummy."""
    if not api_key_env:
        return "EMPTY"
    value = os.environ.get(api_key_env)
    if not value:
        raise ValueError(f"the environment variable {api_key_env!r} (the API key) is not set")
    return value


class OpenAICompletionsBackend:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        tokenizer: str | None = None,
        concurrency: int = 16,
        timeout: float = 120.0,
        include_stop_str_in_output: bool = True,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.name = model
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.timeout = timeout
        self.include_stop_str_in_output = include_stop_str_in_output
        read_api_key(api_key_env)  # fail early when the named variable is missing
        self._tokenizer: Any = None
        if tokenizer:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)

    def __repr__(self) -> str:
        return (
            f"OpenAICompletionsBackend(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    def apply_chat_template(self, messages: Sequence[Message]) -> str:
        if self._tokenizer is not None and getattr(self._tokenizer, "chat_template", None):
            text = self._tokenizer.apply_chat_template(
                list(messages), tokenize=False, add_generation_prompt=True
            )
            return str(text)
        return chatml(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        if self._tokenizer is not None:
            ids = self._tokenizer.encode(text, add_special_tokens=False)
            return text if len(ids) <= max_tokens else str(self._tokenizer.decode(ids[:max_tokens]))
        return text[: max_tokens * _CHARS_PER_TOKEN]

    def generate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]:
        """Blocking; runs its own event loop (call it from a worker thread inside async code)."""
        return asyncio.run(
            self.agenerate(
                prompts,
                stop=stop,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                top_p=top_p,
                seed=seed,
            )
        )

    async def agenerate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]:
        from openai import AsyncOpenAI

        # A client per call: httpx's async pool belongs to the event loop it was first used in.
        client = AsyncOpenAI(
            base_url=self.base_url,
            api_key=read_api_key(self.api_key_env),
            timeout=self.timeout,
            max_retries=3,
        )
        semaphore = asyncio.Semaphore(self.concurrency)
        extra_body = (
            {"include_stop_str_in_output": True} if self.include_stop_str_in_output and stop else None
        )

        async def one(prompt: str, index: int) -> Generation:
            async with semaphore:
                response = await client.completions.create(
                    model=self.model,
                    prompt=prompt,
                    max_tokens=max_new_tokens,
                    temperature=temperature,
                    top_p=top_p,
                    stop=list(stop)[:4] or None,  # OpenAI accepts at most four stop strings
                    seed=None if seed is None else seed + index,
                    extra_body=extra_body,
                )
            return _generation(response, stop)

        try:
            return list(await asyncio.gather(*(one(p, i) for i, p in enumerate(prompts))))
        finally:
            await client.close()


def _generation(response: Any, stop: Sequence[str]) -> Generation:
    choice = response.choices[0]
    text = choice.text or ""
    reason = getattr(choice, "stop_reason", None)  # vLLM: the matched stop string (or token id)
    finish = choice.finish_reason
    if finish == "stop" and isinstance(reason, str) and reason in stop and not text.endswith(reason):
        text += reason
    text, stop_reason = cut_at_stop(text, stop)
    usage = response.usage
    return Generation(
        text=text,
        finish_reason="stop" if stop_reason else ("length" if finish == "length" else "eos"),
        stop_reason=stop_reason,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
    )
