"""vLLM in-process (GPU): ``vllm.LLM`` with ``SamplingParams(stop=…)``. Imported only when configured.

vLLM is not a dependency of searchlab (it needs a GPU build of torch): this module imports it lazily and says so
clearly when it is missing. The stop string is kept in the output (``include_stop_str_in_output``) and the token
ids and sampled log-probabilities come back from vLLM directly.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from agent.backends import Generation, Message, chatml, cut_at_stop


class VLLMBackend:
    def __init__(self, model: str, **engine_args: Any) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import vllm
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise RuntimeError(
                "the vllm backend needs vLLM installed (a GPU machine); use transformers"
            ) from exc
        self._vllm = vllm
        self.llm = vllm.LLM(model=model, **engine_args)
        self.tokenizer = self.llm.get_tokenizer()
        self.name = os.path.basename(os.path.normpath(model))

    def __repr__(self) -> str:
        return f"VLLMBackend(name={self.name!r})"

    def apply_chat_template(self, messages: Sequence[Message]) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return str(
                self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
            )
        return chatml(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return text if len(ids) <= max_tokens else str(self.tokenizer.decode(ids[:max_tokens]))

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
        params = self._vllm.SamplingParams(
            max_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p if temperature > 0 else 1.0,
            seed=seed,
            stop=list(stop) or None,
            include_stop_str_in_output=True,
            logprobs=0,  # the sampled token's log-probability only
        )
        outputs = self.llm.generate(list(prompts), params, use_tqdm=False)
        results: list[Generation] = []
        for output in outputs:
            completion = output.outputs[0]
            text, stop_reason = cut_at_stop(completion.text, stop)
            ids = tuple(int(t) for t in completion.token_ids)
            logprobs = None
            if completion.logprobs is not None:
                logprobs = tuple(
                    float(step[token].logprob) for step, token in zip(completion.logprobs, ids, strict=False)
                )
            finish = "stop" if stop_reason else ("length" if completion.finish_reason == "length" else "eos")
            results.append(
                Generation(
                    text=text,
                    finish_reason=finish,  # type: ignore[arg-type]
                    stop_reason=stop_reason,
                    token_ids=ids,
                    logprobs=logprobs,
                    prompt_tokens=len(output.prompt_token_ids or ()),
                    completion_tokens=len(ids),
                )
            )
        return results
