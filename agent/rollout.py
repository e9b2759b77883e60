"""The rollout engine: one loop for every method, batched across questions, with per-method turn rules.

A rollout starts from the method's prompt and alternates *model* segments (one generation each, stopped at the
method's boundary tags) with *environment* segments (retrieved passages, forced tags, invalid-action notices).
Every turn generates for all active samples in one backend call, and all their searches go to the
:class:`~retrieval.searcher.Searcher` in one call. The method-specific rules (prompts, tags, observation wrappers,
budgets) live in :mod:`agent.rollout_methods`, one class per method; :data:`METHODS` maps names to them.

What a trainer needs is kept per segment: its text, its source (``model`` / ``env``), and for the model segments
the exact token ids the backend sampled (and their log-probabilities when the backend computes them), so that a
trainer can build ``completion_ids`` and an ``env_mask`` (1 = policy token, 0 = inserted by the environment)
without re-tokenising the model's own text: :func:`completion_tokens`.

The engine is async so that judge calls for finished trajectories can run while other samples still generate
(HiPRAG Appendix I): generation and search run in worker threads, ``on_finished`` is called in the event loop as
soon as a rollout ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from agent.backends import Generation, GenerationBackend
from retrieval.searcher import RetrievedDocument, Searcher

SegmentSource = Literal["model", "env"]


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    golds: tuple[str, ...]
    dataset: str = ""
    supporting_titles: tuple[str, ...] = ()  # the dataset's evidence annotation (the evidence judge reads it)


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    source: SegmentSource
    token_ids: tuple[int, ...] | None = None  # model segments, when the backend returns ids
    logprobs: tuple[float, ...] | None = None


@dataclass(slots=True)
class Rollout:
    """One trajectory. ``text`` (all segments joined) is the response the method's parser reads."""

    question: Question
    method: str
    format: str  # the scoring.formats parser name
    prompt: str
    segments: list[Segment] = field(default_factory=list)
    finished: bool = False  # ended with its final answer (not cut by a budget, a length limit or an EOS)
    end: str = ""  # why it ended: answer | eos | one of BUDGET_ENDS
    cut_turns: int = 0  # model turns cut by the per-turn token budget (the rollout may have gone on)
    n_searches: int = 0
    n_generations: int = 0
    queries: list[str] = field(default_factory=list)
    documents: list[list[RetrievedDocument]] = field(default_factory=list)
    intermediate_answers: list[str] | None = None  # AutoSearch: one per retrieval step (agent.judges)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    @property
    def text(self) -> str:
        return "".join(segment.text for segment in self.segments)

    def add_model(self, generation: Generation) -> None:
        self.segments.append(Segment(generation.text, "model", generation.token_ids, generation.logprobs))

    def add_env(self, text: str) -> None:
        if text:
            self.segments.append(Segment(text, "env"))


@dataclass(frozen=True, slots=True)
class RolloutConfig:
    """Budgets and sampling. ``max_turns`` is each method's own budget: Search-R1/AutoSearch turns with search,
    HiPRAG's step budget B, Search-P1's action budget B, TIRESRAG's retrieval rounds."""

    topk: int = 3
    max_turns: int = 4
    max_new_tokens: int = 500
    max_obs_tokens: int = 500
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    use_chat_template: bool = True
    reflect: bool = (
        True  # TIRESRAG: one reflection round after the first answer (training; off in evaluation)
    )
    force_next_step: bool = False  # HiPRAG Alg. 1 line 16 taken literally (see rollout_methods.HiPRAGLoop)
    intermediate_answers: bool = True  # AutoSearch: self-answer after each retrieval step
    max_generations: int = 24  # a hard cap on backend calls per sample, whatever the method's rules
    # Completion tokens of one rollout, the model's and the environment's (what the trainer trains on, TRL's
    # max_completion_length); 0: no limit. A turn is given at most what is left, and a rollout with nothing left
    # ends with ``budget:rollout_tokens``.
    max_rollout_tokens: int = 0


# Why a rollout ended, when a budget ended it (``Rollout.end``): the method's turn budget, a turn cut by
# ``max_new_tokens`` that the method cannot continue from, the rollout's token budget, or the hard generation cap.
BUDGET_ENDS = ("budget:turns", "budget:turn_tokens", "budget:rollout_tokens", "budget:generations")
_END_NAMES = {"budget": "budget:turns", "length": "budget:turn_tokens"}  # the methods' own words → ours


# The papers' settings: Search-R1/AutoSearch 4 turns + 1 final, top-3 (REFERENCE.md §c); HiPRAG ≤ 10 rounds
# (inference.py); Search-P1 B = 4, top-3 (§4.1); TIRESRAG ≤ 8 retrieval rounds, top-5, 512 tokens (§2.6).
PAPER_CONFIGS: dict[str, RolloutConfig] = {
    "search_r1": RolloutConfig(topk=3, max_turns=4, max_new_tokens=500),
    "autosearch": RolloutConfig(topk=3, max_turns=4, max_new_tokens=500),
    "hiprag": RolloutConfig(topk=3, max_turns=10, max_new_tokens=500),
    "search_p1": RolloutConfig(topk=3, max_turns=4, max_new_tokens=500, temperature=0.6, top_p=0.95),
    "tiresrag": RolloutConfig(topk=5, max_turns=8, max_new_tokens=512, reflect=False),
}


@dataclass(slots=True)
class LoopState:
    """A rollout in progress and the counters its method keeps."""

    rollout: Rollout
    phase: str = "main"
    steps: int = 0
    answers: int = 0
    done: bool = False
    # What the rollout token budget leaves after the latest model turn (None: no budget); set by run_rollouts.
    tokens_left: int | None = None


# Tokens a search adds besides the model's turn text and the passages: the observation's wrapper and tags.
SEARCH_WRAPPER_TOKENS = 16
# Tokens kept for the final answer turn (``<answer>…</answer>`` of a short span).
ANSWER_TOKENS = 32


def room_for_another_search(state: LoopState, config: RolloutConfig) -> bool:
    """Whether the rollout token budget can still hold one more search — a full turn, its passages and wrapper,
    the turn after it — and then a final answer. When it cannot, a method goes to its final answer now (HiPRAG
    Alg. 1 lines 20–22, Search-R1's final turn without a search), as it does when its turn budget is spent, so a
    rollout ends with an answer instead of being cut in the middle of a step (``budget:rollout_tokens``). Our
    reading of the budget: the papers cut at the response length, which on a CPU's short budgets would cut most
    rollouts before their answer."""
    if state.tokens_left is None:
        return True
    need = 2 * config.max_new_tokens + config.max_obs_tokens + SEARCH_WRAPPER_TOKENS + ANSWER_TOKENS
    return state.tokens_left >= need


class LoopMethod(Protocol):
    name: str
    format: str

    def start(self, state: LoopState, backend: GenerationBackend, config: RolloutConfig) -> None:
        """Set ``state.rollout.prompt`` and any environment prefix of the response."""
        ...

    def stop(self, state: LoopState) -> tuple[str, ...]: ...

    def on_generation(self, state: LoopState, generation: Generation, config: RolloutConfig) -> str | None:
        """The generation has been appended; update the state. Return a query to search for, or ``None``."""
        ...

    def on_documents(
        self,
        state: LoopState,
        documents: Sequence[RetrievedDocument],
        backend: GenerationBackend,
        config: RolloutConfig,
    ) -> None: ...


OnFinished = Callable[[Rollout], Awaitable[None] | None]
# ``progress(phase, done, total, detail)``: where a batch of rollouts is, for heartbeats (trainer.progress).
Progress = Callable[[str, int, int, str], None]


def count_tokens(backend: GenerationBackend, text: str) -> int:
    """Tokens of ``text`` by the backend's tokenizer; a backend without one (a remote server that returns text)
    is estimated at 4 characters a token, the same estimate its ``truncate_tokens`` uses."""
    counter = getattr(backend, "count_tokens", None)
    if counter is not None:
        return int(counter(text))
    return (len(text) + 3) // 4


def finish(state: LoopState, end: str, *, finished: bool) -> None:
    state.done = True
    state.rollout.end = _END_NAMES.get(end, end)
    state.rollout.finished = finished


def _tokens_left(state: LoopState, backend: GenerationBackend, config: RolloutConfig) -> int | None:
    """What the rollout token budget leaves for the next turn (``None``: no budget)."""
    if not config.max_rollout_tokens:
        return None
    rollout = state.rollout
    env = sum(count_tokens(backend, s.text) for s in rollout.segments if s.source == "env")
    return config.max_rollout_tokens - rollout.completion_tokens - env


async def run_rollouts(
    backend: GenerationBackend,
    searcher: Searcher,
    method: LoopMethod,
    questions: Sequence[Question],
    config: RolloutConfig,
    *,
    on_finished: OnFinished | None = None,
    progress: Progress | None = None,
) -> list[Rollout]:
    """Roll out every question with ``method``; ``on_finished`` sees each rollout as soon as it ends, and
    ``progress`` hears of every turn and retrieval (for heartbeats)."""
    states = [LoopState(Rollout(q, method.name, method.format, prompt="")) for q in questions]
    for state in states:
        method.start(state, backend, config)
    started = {id(state): time.perf_counter() for state in states}
    callbacks: list[asyncio.Future[None]] = []
    report = progress or (lambda phase, done, total, detail: None)
    turn = 0
    while active := [s for s in states if not s.done]:
        # One backend call per (boundary tags, token cap): a turn may have only what the rollout budget leaves.
        groups: dict[tuple[tuple[str, ...], int], list[LoopState]] = {}
        for state in active:
            left = _tokens_left(state, backend, config)
            if left is not None and left <= 0:
                finish(state, "budget:rollout_tokens", finished=False)
                continue
            cap = config.max_new_tokens if left is None else min(config.max_new_tokens, left)
            state.tokens_left = left
            groups.setdefault((method.stop(state), cap), []).append(state)
        searches: list[tuple[LoopState, str]] = []
        running = sum(len(g) for g in groups.values())
        report(
            "generate",
            turn + 1,
            max(turn + 1, config.max_turns + 1),
            f"{running}/{len(states)} rollouts active",
        )
        for (stop, cap), group in groups.items():
            inputs = [s.rollout.prompt + s.rollout.text for s in group]
            seed = None if config.seed is None else config.seed + turn
            generations = await asyncio.to_thread(
                backend.generate,
                inputs,
                stop=stop,
                max_new_tokens=cap,
                temperature=config.temperature,
                top_p=config.top_p,
                seed=seed,
            )
            for state, generation in zip(group, generations, strict=True):
                rollout = state.rollout
                rollout.n_generations += 1
                rollout.prompt_tokens += generation.prompt_tokens
                rollout.completion_tokens += generation.completion_tokens
                rollout.add_model(generation)
                cut_by_rollout_budget = generation.finish_reason == "length" and cap < config.max_new_tokens
                if generation.finish_reason == "length" and not cut_by_rollout_budget:
                    rollout.cut_turns += 1
                if state.tokens_left is not None:
                    state.tokens_left -= generation.completion_tokens
                query = method.on_generation(state, generation, config)
                if cut_by_rollout_budget and not (state.done and rollout.finished):
                    finish(state, "budget:rollout_tokens", finished=False)
                elif query is not None and not state.done:
                    searches.append((state, query))
                elif not state.done and rollout.n_generations >= config.max_generations:
                    finish(state, "budget:generations", finished=False)
        turn += 1
        if searches:
            queries = [query for _, query in searches]
            report("retrieve", turn, turn, f"{len(queries)} queries")
            results = await asyncio.to_thread(searcher.search, queries, config.topk)
            for (state, query), documents in zip(searches, results, strict=True):
                state.rollout.n_searches += 1
                state.rollout.queries.append(query)
                state.rollout.documents.append(list(documents))
                method.on_documents(state, documents, backend, config)
                if not state.done and state.rollout.n_generations >= config.max_generations:
                    finish(state, "budget:generations", finished=False)
        for state in active:
            if state.done:
                state.rollout.seconds = time.perf_counter() - started[id(state)]
                if on_finished is not None:
                    result = on_finished(state.rollout)
                    if result is not None:  # a coroutine: start it now, so it overlaps the next turns
                        callbacks.append(asyncio.ensure_future(result))
    if callbacks:
        await asyncio.gather(*callbacks)
    return [state.rollout for state in states]


def rollout_questions(
    backend: GenerationBackend,
    searcher: Searcher,
    method: str,
    questions: Sequence[Question],
    config: RolloutConfig | None = None,
) -> list[Rollout]:
    """Blocking convenience: roll out ``questions`` with the named method (paper settings by default)."""
    from agent.rollout_methods import METHODS

    loop = METHODS[method]()
    return asyncio.run(run_rollouts(backend, searcher, loop, questions, config or PAPER_CONFIGS[method]))


def completion_tokens(
    rollout: Rollout, encode: Callable[[str], list[int]]
) -> tuple[list[int], list[int], list[float] | None]:
    """``(completion_ids, env_mask, logprobs)`` of a rollout for a trainer.

    Model segments contribute their sampled ids (``env_mask`` 1); environment segments are encoded with
    ``encode`` (``env_mask`` 0). A model segment without ids (a server that returns text only) is encoded too, and
    still masked 1. ``logprobs`` has one value per completion token (0.0 for environment tokens), or ``None`` when
    some model segment has none.
    """
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] | None = []
    for segment in rollout.segments:
        if segment.source == "model":
            piece = list(segment.token_ids) if segment.token_ids is not None else encode(segment.text)
            mask.extend([1] * len(piece))
            if logprobs is not None and segment.logprobs is not None and len(segment.logprobs) == len(piece):
                logprobs.extend(segment.logprobs)
            else:
                logprobs = None
        else:
            piece = encode(segment.text)
            mask.extend([0] * len(piece))
            if logprobs is not None:
                logprobs.extend([0.0] * len(piece))
        ids.extend(piece)
    return ids, mask, logprobs


def with_config(config: RolloutConfig, **changes: object) -> RolloutConfig:
    """A copy of ``config`` with some fields changed (dataclasses.replace, typed loosely for JSON configs)."""
    return replace(config, **changes)  # type: ignore[arg-type]
