"""Rollouts with a tiny random transformers model built in the test (a BPE tokenizer trained offline on a few lines,
a 2-layer Llama with hidden size 16): the backend's batching, stop-string cuts and token bookkeeping."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.rollout import PAPER_CONFIGS, Question, completion_tokens, run_rollouts, with_config
from agent.rollout_methods import METHODS
from tests.agent.conftest import PASSAGES, KeywordSearcher

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CORPUS = [
    "<think> I need to search. </think> <search> capital of France </search> <information> Doc 1 </information>",
    "<answer> Paris </answer> <reasoning> plan </reasoning> <tool_call> x </tool_call> <tool_response> y",
    "</tool_response> <step> <conclusion> done </conclusion> </step> <context> c </context>",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
] + [contents for _, contents in PASSAGES]


@pytest.fixture(scope="module")
def tiny_backend() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from agent.backend_transformers import TransformersBackend

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS * 5, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    return TransformersBackend(model, fast, name="tiny", threads=2, logprobs=True)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_it_rolls_out_every_method_with_a_tiny_random_model(method: str, tiny_backend: Any) -> None:
    questions = [Question(f"q{i}", "What is the capital of France", ("Paris",)) for i in range(3)]
    config = with_config(PAPER_CONFIGS[method], max_new_tokens=12, max_turns=2, temperature=1.0, seed=7)
    rollouts = asyncio.run(
        run_rollouts(tiny_backend, KeywordSearcher(PASSAGES), METHODS[method](), questions, config)
    )
    assert len(rollouts) == 3
    tokenizer = tiny_backend.tokenizer
    for rollout in rollouts:
        assert rollout.end
        for segment in rollout.segments:
            if segment.source == "model":
                assert segment.token_ids is not None and segment.logprobs is not None
                assert tokenizer.decode(list(segment.token_ids)) == segment.text  # exact, no re-tokenising
                assert len(segment.logprobs) == len(segment.token_ids)
                assert all(lp <= 0.0 for lp in segment.logprobs)
        ids, mask, logprobs = completion_tokens(
            rollout, lambda t: tokenizer.encode(t, add_special_tokens=False)
        )
        assert len(ids) == len(mask) and logprobs is not None and len(logprobs) == len(ids)
        assert sum(mask) == sum(len(s.token_ids or ()) for s in rollout.segments if s.source == "model")


@pytest.mark.parametrize(
    ("stop", "expect_cut"),
    [
        ((), False),  # no stop strings: EOS or max_new_tokens
        (("e",), True),  # a one-letter stop string: the random model writes an "e" somewhere soon
    ],
)
def test_it_cuts_each_row_at_its_first_stop_string(
    tiny_backend: Any, stop: tuple[str, ...], expect_cut: bool
) -> None:
    prompts = ["<think> I need", "Paris is the capital and"]
    generations = tiny_backend.generate(prompts, stop=stop, max_new_tokens=40, temperature=1.0, seed=3)
    for generation in generations:
        assert generation.text == tiny_backend.decode(generation.token_ids)
        if generation.finish_reason == "stop":
            assert generation.stop_reason == "e"
            # the stop string is completed by the LAST token (nothing generated past it but that token's tail)
            assert "e" not in tiny_backend.decode(generation.token_ids[:-1])
        assert generation.prompt_tokens > 0
    assert any(g.finish_reason == "stop" for g in generations) == expect_cut


def test_it_is_greedy_and_reproducible_at_temperature_zero(tiny_backend: Any) -> None:
    first = tiny_backend.generate(["<answer>"], stop=(), max_new_tokens=8)
    second = tiny_backend.generate(["<answer>"], stop=(), max_new_tokens=8, seed=99)
    assert first[0].token_ids == second[0].token_ids


def test_rows_sharing_a_prefix_generate_as_they_would_each_alone(tiny_backend: Any) -> None:
    """The shared prefix is encoded once and each row's own tokens follow it, left-padded after it: greedy tokens
    and their log-probabilities are those of a backend that encodes every row whole, and a later turn (the same
    rows grown longer) starts from the kept prefix instead of encoding it again."""
    from agent.backend_transformers import MIN_SHARED_PREFIX, shared_prefix_length

    prefix = " ".join(CORPUS[:3])
    rows = [prefix + " <answer>", prefix + " <search> capital of France </search>", prefix + " <step>"]
    tokenizer = tiny_backend.tokenizer
    encoded = [tokenizer.encode(r, add_special_tokens=False) for r in rows]
    assert shared_prefix_length(encoded) >= MIN_SHARED_PREFIX

    def generate(prompts: list[str], reuse: bool) -> list[Any]:
        tiny_backend.reuse_prefix = reuse
        tiny_backend._prefixes.clear()
        try:
            return tiny_backend.generate(prompts, stop=(), max_new_tokens=6)
        finally:
            tiny_backend.reuse_prefix = True

    whole = generate(rows, reuse=False)
    shared = generate(rows, reuse=True)
    assert len(tiny_backend._prefixes) == 1
    for a, b in zip(whole, shared, strict=True):
        assert a.token_ids == b.token_ids and a.prompt_tokens == b.prompt_tokens
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)

    # The next turn: the same rows grown by their generations; the kept prefix serves it (no second entry).
    grown = [r + g.text + " </answer>" for r, g in zip(rows, shared, strict=True)]
    (kept,) = tiny_backend._prefixes
    again = tiny_backend.generate(grown, stop=(), max_new_tokens=6)
    assert list(tiny_backend._prefixes) == [kept]
    tiny_backend.reuse_prefix = False
    try:
        assert [g.token_ids for g in again] == [
            g.token_ids for g in tiny_backend.generate(grown, stop=(), max_new_tokens=6)
        ]
    finally:
        tiny_backend.reuse_prefix = True


def test_the_shared_prefix_length() -> None:
    from agent.backend_transformers import shared_prefix_length

    assert shared_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert shared_prefix_length([[5, 6]]) == 2
    assert shared_prefix_length([[1], [2]]) == 0
    assert shared_prefix_length([]) == 0


@pytest.mark.slow  # 2-6 s on a shared two-core machine
def test_stop_criteria_built_once_stop_where_generate_s_own_would(tiny_backend: Any) -> None:
    """The criterion built once (``stopping_criteria=``) and the one ``generate`` builds from ``stop_strings=``
    every call give the same tokens, finish and stop reasons, sampled and greedy; the built one is kept."""
    from agent.backend_transformers import stop_criteria

    prompts = ["<think> I need", "Paris is the capital and", "<search> capital"]
    stop = ("e", "</search>", "an")

    def generate(reuse: bool, **kwargs: Any) -> list[Any]:
        tiny_backend.reuse_stop_criteria, tiny_backend.logprobs = reuse, False
        try:
            return tiny_backend.generate(prompts, stop=stop, max_new_tokens=20, **kwargs)
        finally:
            tiny_backend.reuse_stop_criteria, tiny_backend.logprobs = True, True

    for kwargs in ({"temperature": 1.0, "seed": 3}, {}):
        built_once, per_call = generate(True, **kwargs), generate(False, **kwargs)
        assert [(g.token_ids, g.finish_reason, g.stop_reason) for g in built_once] == [
            (g.token_ids, g.finish_reason, g.stop_reason) for g in per_call
        ]
        assert kwargs == {} or any(
            g.finish_reason == "stop" for g in built_once
        )  # a stop string did stop a row
    assert stop_criteria(tiny_backend.tokenizer, stop) is stop_criteria(tiny_backend.tokenizer, list(stop))
    assert stop_criteria(tiny_backend.tokenizer, stop) is not stop_criteria(tiny_backend.tokenizer, ("zz",))
