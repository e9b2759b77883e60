"""Rollouts without agent/: canned trajectories, and the policy writing turns against a fixed fake search.

* :class:`ScriptedSearchRollout` returns short trajectories in the method's format with 0–2 searches whose
  retrieved spans are fixed text, right or wrong answers drawn at random, and plausible judge outcomes. The policy
  did not write them (they are off-policy), which is all a smoke test, the env-mask test and the benchmark need:
  a known layout of policy and environment tokens and rewards that differ within a group.
* :class:`GeneratingSearchRollout` lets the policy write each turn (``max_turn_tokens`` sampled tokens) and answers
  with the same fixed retrieved span between turns: real generation cost, real on-policy tokens, no retriever.

The lead replaces both with agent/'s per-method rollout loops through ``rollout.factory = "module:function"``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import torch

from trainer.config import RunConfig
from trainer.rollout import Rollout, RolloutRequest, Segment

RETRIEVED = "Doc 1(Title: Paris) Paris is the capital of France."
WRONG_ANSWER = "Lyon"


def _hiprag(query: str, answer: str, searches: int) -> list[tuple[str, bool]]:
    parts: list[tuple[str, bool]] = [("<think>\n", True)]
    for i in range(searches):
        parts.append(
            (
                f"<step>\n    <reasoning>Look up step {i + 1}.</reasoning>\n    <search>{query}</search>\n",
                True,
            )
        )
        parts.append((f"    <context>{RETRIEVED}</context>\n    <conclusion>", False))
        parts.append((f"It says {answer}.</conclusion>\n</step>\n", True))
    if not searches:
        parts.append(("<step>\n    <reasoning>I know it.</reasoning>\n", True))
        parts.append((f"    <conclusion>It is {answer}.</conclusion>\n</step>\n", True))
    parts.append((f"</think>\n<answer>{answer}</answer>", True))
    return parts


def _interleaved(query: str, answer: str, searches: int, reflect: bool) -> list[tuple[str, bool]]:
    parts: list[tuple[str, bool]] = []
    for _ in range(searches):
        parts.append((f"<think>I must search.</think>\n<search> {query} </search>", True))
        parts.append((f"\n\n<information>{RETRIEVED}</information>\n\n", False))
    if reflect:
        parts.append((f"<think>A guess.</think>\n<answer> {WRONG_ANSWER} </answer>\n", True))
    parts.append((f"<think>So.</think>\n<answer> {answer} </answer>", True))
    return parts


def _search_p1(query: str, answer: str, searches: int) -> list[tuple[str, bool]]:
    parts: list[tuple[str, bool]] = [("<reasoning>Plan:\n1. Find the capital.</reasoning>\n", True)]
    for _ in range(searches):
        parts.append((f"<tool_call>{query}</tool_call>\n", True))
        parts.append((f"<tool_response>{RETRIEVED}</tool_response>\n", False))
    parts.append((f"<reasoning>Found.</reasoning>\n<answer>{answer}</answer>", True))
    return parts


Script = Callable[[random.Random, str, str, str, int], tuple[list[tuple[str, bool]], dict[str, Any]]]


def _hiprag_script(
    rng: random.Random, query: str, answer: str, gold: str, searches: int
) -> tuple[list[tuple[str, bool]], dict[str, Any]]:
    flags = [rng.random() < 0.3 for _ in range(max(searches, 1))]  # one detector verdict per step
    return _hiprag(query, answer, searches), {"step_flags": flags}


def _search_p1_script(
    rng: random.Random, query: str, answer: str, gold: str, searches: int
) -> tuple[list[tuple[str, bool]], dict[str, Any]]:
    steps = rng.randint(0, 1)
    evaluation = {
        "planner_score": rng.choice((0.2, 0.6, 1.0, 1.2)),
        "model_plan_steps": 1,
        "effective_steps_self": steps,
        "effective_steps_ref": rng.randint(0, 2),
        "outcome_accuracy_score": float(answer == gold),
        "outcome_reasoning_score": rng.choice((0.0, 0.5, 1.0)),
    }
    return _search_p1(query, answer, searches), {"n_ref_steps": 2, "evaluation": evaluation}


def _search_r1_script(
    rng: random.Random, query: str, answer: str, gold: str, searches: int
) -> tuple[list[tuple[str, bool]], dict[str, Any]]:
    return _interleaved(query, answer, searches, reflect=False), {}


def _autosearch_script(
    rng: random.Random, query: str, answer: str, gold: str, searches: int
) -> tuple[list[tuple[str, bool]], dict[str, Any]]:
    parts = _interleaved(query, answer, searches, reflect=False)
    return parts, {"intermediate_answers": [rng.choice((gold, WRONG_ANSWER)) for _ in range(searches)]}


def _tiresrag_script(
    rng: random.Random, query: str, answer: str, gold: str, searches: int
) -> tuple[list[tuple[str, bool]], dict[str, Any]]:
    parts = _interleaved(query, answer, searches, reflect=rng.random() < 0.5)
    return parts, {"sufficiency": rng.random() < 0.6, "thinking": round(rng.random(), 2)}


# Each method's canned trajectory and the judge outcomes its reward reads (scoring.scorer.METHODS[m].judgements).
SCRIPTS: dict[str, Script] = {
    "search_r1": _search_r1_script,
    "hiprag": _hiprag_script,
    "autosearch": _autosearch_script,
    "search_p1": _search_p1_script,
    "tiresrag": _tiresrag_script,
}


def scripted_parts(
    method: str, rng: random.Random, gold: str
) -> tuple[list[tuple[str, bool]], dict[str, Any]]:
    """One canned trajectory as (text, is_model) parts, and judge outcomes for it."""
    answer = gold if rng.random() < 0.5 else WRONG_ANSWER
    searches = rng.randint(0, 2)
    return SCRIPTS[method](rng, "capital of France", answer, gold, searches)


def _gold(row: Any) -> str:
    golds = row.get("golden_answers") if hasattr(row, "get") else None
    if isinstance(golds, list) and golds:
        return str(golds[0])
    return golds if isinstance(golds, str) else "Paris"


def _encode(tokenizer: Any, text: str) -> tuple[int, ...]:
    return tuple(tokenizer(text, add_special_tokens=False)["input_ids"])


class ScriptedSearchRollout:
    """Canned trajectories of ``method``'s format (see the module docstring). Deterministic given ``seed``."""

    def __init__(self, method: str, tokenizer: Any, *, seed: int = 0) -> None:
        self.method = method
        self.tokenizer = tokenizer
        self.rng = random.Random(seed)

    def __call__(self, requests: Sequence[RolloutRequest], policy: Any) -> list[Rollout]:
        rollouts = []
        for request in requests:
            parts, judgements = scripted_parts(self.method, self.rng, _gold(request.row))
            segments = [Segment(_encode(self.tokenizer, text), is_model, text) for text, is_model in parts]
            eos = self.tokenizer.eos_token_id
            if eos is not None:  # the policy ends its completion; TRL counts one without EOS as truncated
                last = segments[-1]
                segments[-1] = Segment((*last.token_ids, eos), True, last.text)
            rollouts.append(
                Rollout(
                    prompt_ids=_encode(self.tokenizer, request.prompt),
                    segments=tuple(segments),
                    text="".join(text for text, _ in parts),
                    judgements=judgements,
                )
            )
        return rollouts


class GeneratingSearchRollout:
    """The policy samples ``max_turn_tokens`` per turn; between turns the fake search inserts the fixed span."""

    def __init__(
        self, tokenizer: Any, *, max_turns: int = 2, max_turn_tokens: int = 24, temperature: float = 1.0
    ) -> None:
        self.tokenizer = tokenizer
        self.max_turns = max_turns
        self.max_turn_tokens = max_turn_tokens
        self.temperature = temperature
        self.observation = f"\n\n<information>{RETRIEVED}</information>\n\n"

    @classmethod
    def from_config(cls, config: RunConfig, tokenizer: Any) -> GeneratingSearchRollout:
        """``rollout.factory = "generate"``: the run's turn budgets and sampling temperature."""
        return cls(
            tokenizer,
            max_turns=config.rollout.max_turns,
            max_turn_tokens=config.rollout.max_turn_tokens,
            temperature=config.training.temperature,
        )

    @torch.no_grad()
    def __call__(self, requests: Sequence[RolloutRequest], policy: Any) -> list[Rollout]:
        tokenizer = self.tokenizer
        prompts = [_encode(tokenizer, r.prompt) for r in requests]
        observation = _encode(tokenizer, self.observation)
        segments: list[list[Segment]] = [[] for _ in requests]
        contexts = [list(p) for p in prompts]
        done = [False] * len(requests)
        for turn in range(self.max_turns + 1):
            active = [i for i, d in enumerate(done) if not d]
            if not active:
                break
            for i, new in zip(active, self._generate([contexts[i] for i in active], policy), strict=True):
                segments[i].append(Segment(tuple(new), True, tokenizer.decode(new)))
                contexts[i].extend(new)
                ended = bool(new) and new[-1] == tokenizer.eos_token_id
                if ended or "</answer>" in segments[i][-1].text or turn == self.max_turns:
                    done[i] = True
                else:
                    segments[i].append(Segment(observation, False, self.observation))
                    contexts[i].extend(observation)
        return [
            Rollout(prompt_ids=p, segments=tuple(s), text="".join(x.text for x in s))
            for p, s in zip(prompts, segments, strict=True)
        ]

    def _generate(self, contexts: list[list[int]], policy: Any) -> list[list[int]]:
        pad = self.tokenizer.pad_token_id
        width = max(len(c) for c in contexts)
        ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts])
        mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts])
        out = policy.generate(
            input_ids=ids.to(policy.device),
            attention_mask=mask.to(policy.device),
            max_new_tokens=self.max_turn_tokens,
            do_sample=True,
            temperature=self.temperature,
            top_k=0,
            pad_token_id=pad,
        )
        result = []
        for row in out[:, width:].tolist():
            if self.tokenizer.eos_token_id in row:  # keep the EOS, drop the padding after it
                row = row[: row.index(self.tokenizer.eos_token_id) + 1]
            result.append(row or [self.tokenizer.eos_token_id])
        return result
