"""What the trainer needs from a rollout, and the TRL ``rollout_func`` built over it.

A rollout of a search agent is a prompt followed by alternating *segments*: text the policy generated (trained on)
and text the environment inserted (retrieved passages, the invalid-action notice, HiPRAG's injected ``<context>`` /
``<conclusion>`` opening). Agent rollouts (agent/) produce exactly that; the trainer asks for it through the narrow
:class:`RolloutFn` protocol:

    requests (one per completion: the prompt text and its dataset row)  →  one :class:`Rollout` each

and :func:`make_rollout_func` turns it into what TRL 1.16's ``GRPOTrainer(rollout_func=…)`` calls. TRL passes the
generation batch's prompts (each already repeated ``num_generations`` times by its sampler) and expects
``prompt_ids``, ``completion_ids`` and ``logprobs`` back; every other key is per-completion data forwarded to the
reward functions as keyword arguments, except ``env_mask``, which TRL pops and multiplies into the loss mask
(``loss_mask = completion_mask * env_mask``). So environment tokens enter the model as context but get no policy
gradient, no KL and no entropy term (REFERENCE.md §c: Search-R1's ``info_mask`` with ``state_masking``).

Forwarded per completion: ``trajectory_text`` (what scoring parses: the segments' text, exactly as produced, which a
decode of the token ids need not reproduce), ``judgements`` (judge outcomes in ``scoring.scorer.score``'s JSON form,
e.g. HiPRAG ``step_flags``, AutoSearch ``intermediate_answers``) and ``rollout_extras`` (whatever a judge run later
may need, e.g. HiPRAG's regenerated answers). With dynamic sampling (:mod:`trainer.dynamic_sampling`) also each
completion's own dataset row and ``rollout_prompt`` (:func:`row_columns`), because a group may then come from a
question other than the one TRL sampled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # trainer.dynamic_sampling imports this module
    from trainer.dynamic_sampling import DynamicSampler


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of completion tokens from one source. ``logprobs`` (model segments, optional) are sampling log-probs."""

    token_ids: tuple[int, ...]
    is_model: bool
    text: str = ""
    logprobs: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.logprobs is not None and len(self.logprobs) != len(self.token_ids):
            raise ValueError(f"{len(self.logprobs)} logprobs for {len(self.token_ids)} tokens")


@dataclass(frozen=True, slots=True)
class RolloutRequest:
    """One completion to produce: the prompt TRL gave and the dataset row it came from (question, golds, …)."""

    prompt: str
    row: Mapping[str, Any]
    index: int  # position in the generation batch; index // num_generations is the question's group


@dataclass(frozen=True, slots=True)
class Rollout:
    prompt_ids: tuple[int, ...]
    segments: tuple[Segment, ...]
    text: str  # the completion as scoring parses it
    judgements: Mapping[str, Any] = field(default_factory=dict)
    extras: Mapping[str, Any] = field(default_factory=dict)

    @property
    def completion_ids(self) -> list[int]:
        return [t for s in self.segments for t in s.token_ids]

    @property
    def env_mask(self) -> list[int]:
        return env_mask(self.segments)


class RolloutFn(Protocol):
    """Produce one :class:`Rollout` per request, in order. ``policy`` is the model being trained (TRL's
    ``trainer.model``, possibly PEFT-wrapped), for rollouts that generate in-process; remote backends ignore it."""

    def __call__(self, requests: Sequence[RolloutRequest], policy: Any) -> Sequence[Rollout]: ...


def env_mask(segments: Sequence[Segment]) -> list[int]:
    """1 for every policy token, 0 for every environment token, in completion order.

    >>> env_mask([Segment((5, 6), True), Segment((7,), False), Segment((8,), True)])
    [1, 1, 0, 1]
    """
    return [int(s.is_model) for s in segments for _ in s.token_ids]


def rollout_columns(rollouts: Sequence[Rollout]) -> dict[str, Any]:
    """The dict TRL's ``rollout_func`` returns. ``logprobs`` is given only when every model segment has them
    (environment tokens get 0.0: they are masked out); otherwise ``None``, and TRL recomputes what it needs."""
    have_logprobs = all(s.logprobs is not None for r in rollouts for s in r.segments if s.is_model)
    logprobs: list[list[float]] | None = None
    if have_logprobs:
        logprobs = [
            [lp for s in r.segments for lp in (s.logprobs or (0.0,) * len(s.token_ids))] for r in rollouts
        ]
    for i, rollout in enumerate(rollouts):
        if not rollout.completion_ids:
            raise ValueError(f"rollout {i} has no completion tokens")
        if not any(s.is_model and s.token_ids for s in rollout.segments):
            raise ValueError(f"rollout {i} has no policy tokens: nothing to train on")
    return {
        "prompt_ids": [list(r.prompt_ids) for r in rollouts],
        "completion_ids": [r.completion_ids for r in rollouts],
        "logprobs": logprobs,
        "env_mask": [r.env_mask for r in rollouts],
        "trajectory_text": [r.text for r in rollouts],
        "judgements": [dict(r.judgements) for r in rollouts],
        "rollout_extras": [dict(r.extras) for r in rollouts],
    }


# The columns a rollout adds to TRL's rows (``rollout_columns`` and ``row_columns``), named once, so the three
# places that must leave some of them out (here, trainer.rewards, trainer.dynamic_sampling) cannot drift apart.
TRL_COLUMNS = frozenset(
    {"prompt_ids", "completion_ids", "logprobs", "env_mask"}
)  # TRL keeps these for itself
AGENT_COLUMNS = frozenset(
    {"trajectory_text", "judgements", "rollout_extras", "rollout_prompt"}
)  # ours, per rollout

# Row keys never forwarded: TRL's own (it reads ``prompt`` before the rollout and keeps it out of the reward's
# arguments; the prompt rolled out from travels as ``rollout_prompt``) and the rollout's columns.
_NOT_FORWARDED = frozenset({"prompt"}) | TRL_COLUMNS | AGENT_COLUMNS


def row_columns(requests: Sequence[RolloutRequest]) -> dict[str, list[Any]]:
    """Each request's own dataset row as per-completion columns, and ``rollout_prompt``, the prompt it was rolled
    out from. TRL 1.16 writes every list the rollout function returns over the batch rows' keys
    (``GRPOTrainer._generate_and_score_completions``: ``inp[key] = values[i]``) before the reward functions get the
    rows' columns, so these make a completion scored against the row it was rolled out for (its golds, its
    supporting titles), also where dynamic sampling put another question's group in the place TRL sampled."""
    keys = dict.fromkeys(key for r in requests for key in r.row if key not in _NOT_FORWARDED)
    columns: dict[str, list[Any]] = {key: [r.row.get(key) for r in requests] for key in keys}
    columns["rollout_prompt"] = [r.prompt for r in requests]
    return columns


def run_rollout(rollout: RolloutFn, requests: Sequence[RolloutRequest], policy: Any) -> list[Rollout]:
    """``rollout(requests, policy)`` as a list, checked to hold one result per request."""
    results = list(rollout(requests, policy))
    if len(results) != len(requests):
        raise ValueError(f"the rollout returned {len(results)} results for {len(requests)} requests")
    return results


def make_rollout_func(
    rollout: RolloutFn, rows: Sequence[Mapping[str, Any]], sampler: DynamicSampler | None = None
) -> Callable[[list[Any], Any], dict[str, Any]]:
    """Wrap ``rollout`` as TRL's ``rollout_func(prompts, trainer) -> dict``.

    TRL hands the rollout function prompts only; ``rows`` (the training dataset) lets each request carry its row,
    found by its prompt, so a rollout can build its method's own prompt from the question and judges can see the
    golds. With a ``sampler`` (``training.dynamic_sampling``), a training batch's groups without reward spread are
    replaced by groups of other questions (:mod:`trainer.dynamic_sampling`), and every completion's row travels with
    it (:func:`row_columns`); without one the returned columns are exactly the rollouts'.
    """
    by_prompt = {str(row["prompt"]): row for row in rows}

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        requests = []
        for index, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                raise TypeError("search rollouts take text prompts; render chat templates inside the rollout")
            requests.append(RolloutRequest(prompt=prompt, row=by_prompt.get(prompt, {}), index=index))
        # DAPO fills training batches (its spare groups ride in this call); an evaluation scores what it drew
        if sampler is not None and getattr(trainer.model, "training", False):
            requests, results = sampler.sample(
                requests,
                rollout,
                trainer.model,
                state=trainer.state,
                stream=int(trainer.accelerator.process_index),
            )
        else:
            results = run_rollout(rollout, requests, trainer.model)
        if sampler is None:
            return rollout_columns(results)
        return {**rollout_columns(results), **row_columns(requests)}

    return rollout_func
