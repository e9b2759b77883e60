"""Warm-start demonstrations: each method's own format, written through the real rollout loop and retriever.

A demonstration is what a competent agent would write for a question whose supporting facts are known (the
dataset's ``metadata.supporting_titles``): one search per supporting fact, its query written from the fact's title
and the question, the passages the real retriever returns for that query, a short conclusion taken from those
passages, and the gold answer. Questions marked as single-hop common knowledge get a *no-search* demonstration
(HiPRAG's point: the agent must also see when not to search); see :func:`needs_search`. The plans are
:mod:`trainer.demonstration_plans`, each method's turns and conclusions :mod:`trainer.demonstration_turns`.

The model's turns are played by :class:`ScriptBackend` inside :func:`agent.rollout.run_rollouts` with the method's
own loop (:data:`agent.rollout_methods.METHODS`), so prompts, forced prefixes, observation wrappers and retrieved
passages are byte-identical to what an RL rollout sees, and the segments say which tokens are the model's (trained
on) and which the environment's (masked, as in RL). Every demonstration is parsed in scoring's paper mode and
kept only when valid.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent.backends import Generation, Message, chatml, cut_at_stop
from agent.rollout import PAPER_CONFIGS, Question, Rollout, RolloutConfig, run_rollouts
from agent.rollout_methods import METHODS
from retrieval.searcher import Searcher
from scoring.formats import parse
from trainer.demonstration_plans import (
    REDUNDANT_KINDS,
    Plan,
    content_words,
    needs_search,
    plan_for,
    query_for,
    with_redundant_search,
)
from trainer.demonstration_turns import (
    MAX_CONCLUSION_WORDS,
    SEARCH_R1_CONCLUSION_WORDS,
    TURNS,
    conclusion_from,
)

__all__ = [
    "MAX_CONCLUSION_WORDS",
    "REDUNDANT_KINDS",
    "SEARCH_R1_CONCLUSION_WORDS",
    "TURNS",
    "Demonstration",
    "Plan",
    "ScriptBackend",
    "build_demonstrations",
    "conclusion_from",
    "content_words",
    "demonstration_config",
    "needs_search",
    "plan_for",
    "query_for",
    "tokenized",
    "with_redundant_search",
]


@dataclass(slots=True)
class Demonstration:
    method: str
    question_id: str
    searches: int
    rollout: Rollout
    valid: bool
    error: str = ""
    redundant: str = ""  # the plan's redundant search (REDUNDANT_KINDS), or ""
    prompt: str = field(init=False)

    def __post_init__(self) -> None:
        self.prompt = self.rollout.prompt


class ScriptBackend:
    """A :class:`~agent.backends.GenerationBackend` whose replies are the demonstrations' turns.

    ``generate`` receives prompt + response so far; the question whose prompt it starts with says which plan to
    follow, and the number of model turns already taken which turn. Tokenising (chat template, truncation of
    observations, token counts) is the real tokenizer's, so observations are cut exactly as in training.
    """

    name = "demonstrations"

    def __init__(self, tokenizer: Any, method: str, plans: Sequence[Plan]) -> None:
        self.tokenizer = tokenizer
        self.turn = TURNS[method]
        self.plans = list(plans)
        self.prompts: dict[str, Plan] = {}  # rollout prompt → plan (set by :func:`build_demonstrations`)
        self.turns_taken: dict[str, int] = {}

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
        out = []
        for text in prompts:
            prompt = max((p for p in self.prompts if text.startswith(p)), key=len)
            plan = self.prompts[prompt]
            k = self.turns_taken.get(prompt, 0)
            self.turns_taken[prompt] = k + 1
            reply, reason = cut_at_stop(self.turn(plan, k, text[len(prompt) :]), stop)
            ids = tuple(self.tokenizer.encode(reply, add_special_tokens=False))
            out.append(
                Generation(
                    reply,
                    "stop" if reason else "eos",
                    reason,
                    token_ids=ids,
                    prompt_tokens=0,
                    completion_tokens=len(ids),
                )
            )
        return out

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


def demonstration_config(method: str, *, max_obs_tokens: int, topk: int, max_turns: int) -> RolloutConfig:
    """The method's paper settings with the training run's observation budget and top-k, no token limit on the
    scripted turns (they are short), and room for every hop (a plan with more hops than the turn budget is
    dropped by :func:`build_demonstrations`)."""
    return replace(
        PAPER_CONFIGS[method],
        max_obs_tokens=max_obs_tokens,
        topk=topk,
        max_turns=max_turns,
        max_new_tokens=10_000,
        max_rollout_tokens=0,
        reflect=False,
    )


def build_demonstrations(
    method: str,
    plans: Sequence[Plan],
    searcher: Searcher,
    tokenizer: Any,
    *,
    max_obs_tokens: int = 200,
    topk: int = 3,
    max_turns: int = 4,
    max_turn_tokens: int = 0,
) -> list[Demonstration]:
    """Roll out ``plans`` with the method's loop, the real ``searcher`` and scripted turns; parse each. With
    ``max_turn_tokens``, a demonstration with a longer model turn is invalid: the training run's budget would cut
    that turn, so the model must not learn it."""
    loop = METHODS[method]()
    config = demonstration_config(method, max_obs_tokens=max_obs_tokens, topk=topk, max_turns=max_turns)
    usable = [p for p in plans if len(p.hops) <= max_turns]
    backend = ScriptBackend(tokenizer, method, usable)
    questions = []
    for plan in usable:
        # The loop's own start() writes the prompt; learn it here so the backend can tell the rollouts apart.
        probe = _probe_prompt(loop, backend, config, plan.question)
        backend.prompts[probe] = plan
        questions.append(plan.question)
    rollouts = asyncio.run(run_rollouts(backend, searcher, loop, questions, config))
    out = []
    for plan, rollout in zip(usable, rollouts, strict=True):
        trajectory = parse(rollout.format, rollout.text)
        error = "" if trajectory.valid else str(trajectory.error)
        if (
            trajectory.valid
            and trajectory.answer is not None
            and trajectory.answer.strip() != plan.answer.strip()
        ):
            error = f"answer {trajectory.answer!r} is not the plan's {plan.answer!r}"
        longest = max((len(g.token_ids or ()) for g in rollout.segments if g.source == "model"), default=0)
        if not error and max_turn_tokens and longest > max_turn_tokens:
            error = f"a model turn of {longest} tokens exceeds the turn budget ({max_turn_tokens})"
        out.append(
            Demonstration(
                method,
                plan.question.id,
                rollout.n_searches,
                rollout,
                not error,
                error,
                redundant=plan.redundant,
            )
        )
    return out


def _probe_prompt(loop: Any, backend: ScriptBackend, config: RolloutConfig, question: Question) -> str:
    from agent.rollout import LoopState
    from agent.rollout import Rollout as AgentRollout

    state = LoopState(AgentRollout(question, loop.name, loop.format, prompt=""))
    loop.start(state, backend, config)
    return state.rollout.prompt


def tokenized(demonstration: Demonstration, tokenizer: Any, *, eos: bool = True) -> dict[str, list[int]]:
    """``input_ids`` and ``labels`` for SFT: the prompt and every environment segment get -100 (no loss), the
    model's segments their own ids — the same ids and the same mask an RL rollout of this text gets
    (trainer.rollout.env_mask). An end-of-sequence token closes the response, trained on, so the model stops."""
    rollout = demonstration.rollout
    input_ids = list(tokenizer.encode(rollout.prompt, add_special_tokens=False))
    labels = [-100] * len(input_ids)
    for segment in rollout.segments:
        ids = list(segment.token_ids or tokenizer.encode(segment.text, add_special_tokens=False))
        input_ids.extend(ids)
        labels.extend(ids if segment.source == "model" else [-100] * len(ids))
    if eos and tokenizer.eos_token_id is not None:
        input_ids.append(int(tokenizer.eos_token_id))
        labels.append(int(tokenizer.eos_token_id))
    return {"input_ids": input_ids, "labels": labels}
