"""The in-process transformers backend (the CPU default: SmolLM2-135M-Instruct from ``agent.setup_model``).

Batched generation with left padding, ``stop_strings`` given with the tokenizer (so a row stops at its boundary
tag), greedy when ``temperature == 0``, torch limited to ``threads`` threads (two: more are slower on a two-core
box, and a Celery worker shares the machine). On a machine with a GPU the model runs there (``from_pretrained``'s
``device``; a trainer's model is wherever TRL put it) and every input tensor follows the model. Each row is then
cut at a token boundary: at its first end-of-sequence token, or at the first token whose text completes a stop
string (``text == decode(token_ids)``).

**Shared prefix, computed once.** The rows of a batch share a long prefix: a method's prompt (HiPRAG's is ~450
tokens) up to the question, often the question too (a GRPO group). Every turn of a multi-turn rollout sends the
whole context again, so re-encoding that prefix for every row and every turn was most of a CPU rollout's time.
The backend computes the prefix's key/value cache once (batch 1), keeps the last few, and starts each batched
``generate`` from a copy of it: the rows' own suffixes follow, left-padded *after* the prefix, and the attention
mask and the position ids (its cumulative sum, as ``generate`` derives them) make each row attend to exactly the
text it would have seen on its own. The backend lives for one rollout batch in training (the weights change
between steps, and so would the cache), for a whole evaluation otherwise.

Log-probabilities (``logprobs=True``) come from one extra teacher-forced forward pass per row over prompt and
completion, at the sampling temperature as TRL computes them — one forward pass against the ``n`` sequential ones
of generation, so it costs little; off by default (evaluation does not need them, the trainer does).

**Stop criteria, built once.** ``generate(stop_strings=..., tokenizer=...)`` builds a ``StopStringCriteria`` on every
call, and its cache key is the tokenizer's ``get_vocab()``, whose order changes from call to call on a fast
tokenizer, so transformers' cache never hits and every call re-embeds the whole vocabulary (0.27–0.54 s a call for
SmolLM2 on a CPU; several calls per rollout batch). :func:`stop_criteria` builds the criterion once per tokenizer
and tuple of stop strings and keeps it as long as the tokenizer lives; ``generate`` gets it as
``stopping_criteria=``, which stops at the same tokens (tests/agent/test_tiny_model.py compares the two;
bench/experiment3_stop_criteria.py times them). A tokenizer given new tokens after its first use would need a new
criterion: none of searchlab's paths adds tokens after loading.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from agent.backends import Generation, Message, chatml, first_stop

# A shared prefix shorter than this is not worth a cache copy (a chat template's header alone is ~30 tokens).
MIN_SHARED_PREFIX = 48
# Prefix caches kept: a rollout's prompt prefix, and a judge's when the policy judges itself in between.
PREFIX_CACHE_SIZE = 2


# tokenizer -> stop strings -> its StopStringCriteria (a weak key: a criterion lives as long as its tokenizer).
_STOP_CRITERIA: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], Any]] = weakref.WeakKeyDictionary()
_STOP_CRITERIA_LOCK = threading.Lock()


def stop_criteria(tokenizer: Any, stop: Sequence[str]) -> Any:
    """The ``StopStringCriteria`` of ``stop`` for ``tokenizer``, built on the first call and reused after."""
    from transformers import StopStringCriteria

    key = tuple(stop)
    with _STOP_CRITERIA_LOCK:
        try:
            built = _STOP_CRITERIA.setdefault(tokenizer, {})
        except TypeError:  # a tokenizer that takes no weak reference: built every call, as generate would
            return StopStringCriteria(tokenizer=tokenizer, stop_strings=list(key))
        if key not in built:
            built[key] = StopStringCriteria(tokenizer=tokenizer, stop_strings=list(key))
        return built[key]


def shared_prefix_length(rows: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every row has in common."""
    if not rows:
        return 0
    first, n = rows[0], min(len(r) for r in rows)
    for i in range(n):
        token = first[i]
        if any(row[i] != token for row in rows):
            return i
    return n


class TransformersBackend:
    """A causal LM and its tokenizer, in this process."""

    # False: every row encodes its whole context every call, as before the shared-prefix cache (a benchmark's
    # baseline: bench/rollout.py --engine prefix, bench/training.py --no-prefix-cache).
    reuse_prefix: bool = True
    # False: ``generate`` builds its stop criteria every call from ``stop_strings=`` (transformers' own path; a
    # benchmark's and a test's baseline: bench/experiment3_stop_criteria.py).
    reuse_stop_criteria: bool = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str = "transformers",
        threads: int | None = 2,
        max_batch_size: int = 16,
        logprobs: bool = False,
    ) -> None:
        import torch

        if threads is not None:
            torch.set_num_threads(threads)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.name = name
        self.max_batch_size = max_batch_size
        self.logprobs = logprobs
        self._lock = threading.Lock()  # one generate at a time: rollouts call it from worker threads
        self._prefixes: OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = OrderedDict()

    @classmethod
    def from_pretrained(
        cls,
        path: str,
        *,
        threads: int | None = 2,
        max_batch_size: int = 16,
        logprobs: bool = False,
        device: str | None = None,
    ) -> TransformersBackend:
        """Load a local folder; never reaches a model hub (``HF_HUB_OFFLINE`` and ``local_files_only``). ``device``:
        where the model runs (default: the GPU when torch sees one, else the CPU)."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads is not None:
            torch.set_num_threads(threads)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            path,
            local_files_only=True,
            dtype=torch.float32,
            device_map=device or ("cuda" if torch.cuda.is_available() else "cpu"),
        )
        return cls(
            model,
            tokenizer,
            name=os.path.basename(os.path.normpath(path)),
            threads=threads,
            max_batch_size=max_batch_size,
            logprobs=logprobs,
        )

    def __repr__(self) -> str:
        return f"TransformersBackend(name={self.name!r})"

    # --- text helpers -----------------------------------------------------------------------------------------

    def apply_chat_template(self, messages: Sequence[Message]) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(
                list(messages), tokenize=False, add_generation_prompt=True
            )
            return str(text)
        return chatml(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) <= max_tokens:
            return text
        return str(self.tokenizer.decode(ids[:max_tokens]))

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids)))

    # --- generation -------------------------------------------------------------------------------------------

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
        out: list[Generation] = []
        with self._lock:
            for start in range(0, len(prompts), self.max_batch_size):
                chunk = prompts[start : start + self.max_batch_size]
                out.extend(self._generate_chunk(chunk, stop, max_new_tokens, temperature, top_p, seed))
        return out

    def chat(
        self, conversations: Sequence[Sequence[Message]], *, max_new_tokens: int = 256
    ) -> list[Generation]:
        """One greedy reply per conversation, ended by the end-of-sequence token (in-process judges)."""
        prompts = [self.apply_chat_template(messages) for messages in conversations]
        return self.generate(prompts, stop=(), max_new_tokens=max_new_tokens)

    def _generate_chunk(
        self,
        prompts: Sequence[str],
        stop: Sequence[str],
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
    ) -> list[Generation]:
        import torch

        if seed is not None:
            torch.manual_seed(seed)
        rows = [list(self.tokenizer.encode(p, add_special_tokens=False)) for p in prompts]
        prefix = self._reusable_prefix(rows) if self.reuse_prefix else ()
        # The tensors go where the model is (a GPU's, when the trainer or from_pretrained put it there).
        batch = {
            k: v.to(self.model.device)
            for k, v in _packed(rows, len(prefix), int(self.tokenizer.pad_token_id)).items()
        }
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_new_tokens,
            "pad_token_id": self.tokenizer.pad_token_id,
            "eos_token_id": self.tokenizer.eos_token_id,
        }
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if stop and self.reuse_stop_criteria:
            from transformers import StoppingCriteriaList

            kwargs["stopping_criteria"] = StoppingCriteriaList([stop_criteria(self.tokenizer, stop)])
        elif stop:
            kwargs.update(stop_strings=list(stop), tokenizer=self.tokenizer)
        with torch.inference_mode():
            if prefix:
                kwargs["past_key_values"] = self._prefix_cache(prefix, len(rows))
            sequences = self.model.generate(**batch, **kwargs)
        width = batch["input_ids"].shape[1]
        prompt_lengths = batch["attention_mask"].sum(dim=1).tolist()
        results: list[Generation] = []
        for row in range(len(prompts)):
            ids = [int(t) for t in sequences[row, width:].tolist()]
            results.append(self._finish(ids, stop, int(prompt_lengths[row])))
        if self.logprobs:
            results = [
                self._with_logprobs(batch, row, width, gen, temperature) for row, gen in enumerate(results)
            ]
        return results

    def _reusable_prefix(self, rows: Sequence[Sequence[int]]) -> tuple[int, ...]:
        """The prefix whose cache this batch starts from: a kept one every row starts with (the longest), else the
        rows' shared prefix when it is long enough (:data:`MIN_SHARED_PREFIX`), else none. Every row keeps at
        least one token of its own, which ``generate`` needs as input."""
        limit = min(len(r) for r in rows) - 1
        for key in sorted(self._prefixes, key=len, reverse=True):
            if len(key) <= limit and all(tuple(r[: len(key)]) == key for r in rows):
                self._prefixes.move_to_end(key)
                return key
        n = min(shared_prefix_length(rows), limit)
        return tuple(rows[0][:n]) if n >= MIN_SHARED_PREFIX else ()

    def _prefix_cache(self, prefix: tuple[int, ...], batch_size: int) -> Any:
        """A fresh ``DynamicCache`` of ``prefix`` for ``batch_size`` rows (generation appends to its copy, never to
        the kept tensors)."""
        import torch
        from transformers import DynamicCache

        if prefix not in self._prefixes:
            out = self.model(torch.tensor([prefix], device=self.model.device), use_cache=True)
            self._prefixes[prefix] = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
            while len(self._prefixes) > PREFIX_CACHE_SIZE:
                self._prefixes.popitem(last=False)
        cache = DynamicCache(ddp_cache_data=self._prefixes[prefix], config=self.model.config)
        cache.batch_repeat_interleave(batch_size)
        return cache

    def _finish(self, ids: list[int], stop: Sequence[str], prompt_tokens: int) -> Generation:
        eos = self.tokenizer.eos_token_id
        finish: str = "length"
        if eos is not None and eos in ids:
            ids = ids[: ids.index(eos)]  # everything after is padding; the eos itself is not text
            finish = "eos"
        text = self.decode(ids)
        found = first_stop(text, stop)
        stop_reason = None
        if found is not None:
            # The shortest token prefix whose text holds a stop string (monotone in the prefix length).
            low, high = 1, len(ids)
            while low < high:
                middle = (low + high) // 2
                if first_stop(self.decode(ids[:middle]), stop) is None:
                    low = middle + 1
                else:
                    high = middle
            ids = ids[:low]
            text = self.decode(ids)
            stop_reason = found[1]
            finish = "stop"
        return Generation(
            text=text,
            finish_reason=finish,  # type: ignore[arg-type]  # one of the three literals above
            stop_reason=stop_reason,
            token_ids=tuple(ids),
            prompt_tokens=prompt_tokens,
            completion_tokens=len(ids),
        )

    def _with_logprobs(
        self, batch: Any, row: int, width: int, generation: Generation, temperature: float
    ) -> Generation:
        import torch

        ids = list(generation.token_ids or ())
        if not ids:
            return Generation(**{**_fields(generation), "logprobs": ()})
        mask = batch["attention_mask"][row]
        prompt_ids = batch["input_ids"][row][mask.bool()]
        completion = torch.tensor(ids, dtype=prompt_ids.dtype, device=prompt_ids.device)
        full = torch.cat([prompt_ids, completion]).unsqueeze(0)
        with torch.inference_mode():
            logits = self.model(full, logits_to_keep=len(ids) + 1).logits[0, :-1].float()
        if temperature > 0:
            logits = logits / temperature
        chosen = torch.log_softmax(logits, dim=-1).gather(1, completion.unsqueeze(1)).squeeze(1)
        return Generation(**{**_fields(generation), "logprobs": tuple(float(x) for x in chosen.tolist())})


def _packed(rows: Sequence[Sequence[int]], prefix: int, pad_id: int) -> dict[str, Any]:
    """``input_ids`` and ``attention_mask`` of rows sharing their first ``prefix`` tokens: the prefix, then each
    row's own tokens left-padded to the longest (with ``prefix`` 0, plain left padding)."""
    import torch

    width = max(len(r) for r in rows) - prefix
    ids = [[*r[:prefix], *[pad_id] * (width - len(r) + prefix), *r[prefix:]] for r in rows]
    mask = [[1] * prefix + [0] * (width - len(r) + prefix) + [1] * (len(r) - prefix) for r in rows]
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}


def _fields(generation: Generation) -> dict[str, Any]:
    return {name: getattr(generation, name) for name in Generation.__slots__}
