"""TRL reward functions over ``scoring``: one adapter per method, with every reward's parts kept for logging.

TRL calls a reward function as ``f(prompts, completions, **columns) -> list[float | None]``, where the columns are
the dataset's (``golden_answers``, ``question``, …), what the rollout forwarded (``trajectory_text``, ``judgements``,
``rollout_extras``, and under dynamic sampling the rows and prompts the rollouts were made from, which replace the
dataset's; see :mod:`trainer.rollout`) and TRL's own (``trainer_state``, ``log_metric``). The adapter parses
and scores the generation batch with ``scoring.scorer.score_batch`` in the method's paper mode and returns each
``Reward.total``. The call's completions are the "current training batch" of HiPRAG Sec. 5.3: in the over-/under-
search-only ablations a trajectory with no step of the evaluated type gets the batch's average bonus.

A completion whose reward needs a judge outcome it does not have (missing, unparseable, an API error) is not read as
"no": the adapter returns ``None`` for it, which TRL turns into NaN, leaves out of the group baseline and gives a zero
advantage; the count is logged as ``reward/unscorable``.

Everything the trainer and the callbacks need beyond the total (components, per-step rewards, the parsed
trajectory, correctness, over/under-search flags) goes into a shared :class:`ScoreLedger`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scoring.formats import PARSERS
from scoring.metrics import cover_exact_match, exact_match, token_f1
from scoring.rewards.result import Reward
from scoring.scorer import METHODS, BatchItem, Scored, ScoringInputError, method_params, score_batch
from scoring.trajectory import StepKind, Trajectory
from scoring.verdicts import MissingVerdict, Verdict
from trainer.config import ConfigError
from trainer.reward_groups import group_metrics, has_spread, outcome_only_total
from trainer.rollout import AGENT_COLUMNS

__all__ = [  # the group statistics stay importable from here
    "JudgeFn",
    "JudgeRequest",
    "MethodReward",
    "SampleScore",
    "ScoreLedger",
    "group_metrics",
    "has_spread",
    "outcome_only_total",
    "over_search_rules",
    "search_flags",
]


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """What a judge sees of one completion (the row has the question and golds; extras what the rollout kept)."""

    method: str
    text: str
    golds: tuple[str, ...]
    trajectory: Trajectory
    row: Mapping[str, Any]
    extras: Mapping[str, Any]


JudgeFn = Callable[[Sequence[JudgeRequest]], Sequence[Mapping[str, Any]]]
"""Judge a batch of completions: one ``judgements`` mapping per request, in ``scoring.scorer.score``'s JSON form.
Outcomes the rollout already supplied take precedence over the judge's."""


@dataclass(frozen=True, slots=True)
class SampleScore:
    """One scored completion. ``reward`` is ``None`` when it could not be scored (``error`` says why)."""

    prompt: str
    row: Mapping[str, Any]
    text: str
    golds: tuple[str, ...]
    trajectory: Trajectory
    reward: Reward | None
    error: str | None
    judgements: Mapping[str, Any]
    cem: bool
    em: bool
    f1: float
    over_search: tuple[Verdict | None, ...] = ()  # one per judged search step
    under_search: tuple[Verdict | None, ...] = ()  # one per judged non-search step
    over_search_rules: tuple[str | None, ...] = ()  # the evidence judge's rule behind each over-search flag
    intermediate_correct: tuple[bool, ...] | None = None  # AutoSearch: EM of each intermediate answer
    extras: Mapping[str, Any] = field(default_factory=dict)  # the rollout's (e.g. ``end``: why it ended)

    @property
    def dataset(self) -> str:
        metadata = self.row.get("metadata")
        source = metadata.get("data_source") if isinstance(metadata, Mapping) else None
        return str(self.row.get("dataset") or source or "train")


@dataclass
class ScoreLedger:
    """Scores shared between the reward adapter (writes), the trainer (advantage shaping) and the callbacks.

    ``batch`` holds the latest generation batch until the trainer takes it; ``since_log`` everything scored since the
    metrics callback last wrote, ``latest`` the last batch for sample trajectories; ``sampling`` what dynamic
    sampling did to the batch (``groups/dynamic_draws``, ``groups/spread_rate_before``) until the trainer logs it.
    """

    batch: list[SampleScore] = field(default_factory=list)
    since_log: list[SampleScore] = field(default_factory=list)
    latest: list[SampleScore] = field(default_factory=list)
    sampling: dict[str, float] = field(default_factory=dict)

    def record(self, scores: list[SampleScore]) -> None:
        self.batch = list(scores)
        self.latest = list(scores)
        self.since_log.extend(scores)

    def take_batch(self) -> list[SampleScore]:
        batch, self.batch = self.batch, []
        return batch

    def take_sampling(self) -> dict[str, float]:
        sampling, self.sampling = self.sampling, {}
        return sampling

    def drain_since_log(self) -> list[SampleScore]:
        scores, self.since_log = self.since_log, []
        return scores


def _verdict(value: Any) -> Verdict | None:
    if isinstance(value, bool):
        return Verdict.TRUE if value else Verdict.FALSE
    if isinstance(value, Verdict):
        return value
    try:
        return Verdict(str(value).lower())
    except ValueError:
        return None


def search_flags(
    trajectory: Trajectory, judgements: Mapping[str, Any]
) -> tuple[tuple[Verdict | None, ...], tuple[Verdict | None, ...]]:
    """HiPRAG's detector verdicts (``step_flags``: TRUE = over-search for a search step, under-search for a
    non-search step), split into the over- and under-search flags OSR/USR are computed from. Steps the list does
    not reach were not judged and count in neither rate."""
    flags = judgements.get("step_flags")
    if not isinstance(flags, list):
        return (), ()
    over: list[Verdict | None] = []
    under: list[Verdict | None] = []
    for step, flag in zip(trajectory.steps, flags, strict=False):
        (over if step.kind is StepKind.SEARCH else under).append(_verdict(flag))
    return tuple(over), tuple(under)


def over_search_rules(trajectory: Trajectory, judgements: Mapping[str, Any]) -> tuple[str | None, ...]:
    """The evidence judge's rule behind each judged search step's flag (``judgements["step_rules"]``, one per step
    as ``step_flags``), aligned with :func:`search_flags`' over-search flags; () when the judge names none."""
    flags, rules = judgements.get("step_flags"), judgements.get("step_rules")
    if not isinstance(flags, list) or not isinstance(rules, list):
        return ()
    return tuple(
        rules[i] if i < len(rules) and isinstance(rules[i], str) else None
        for i, (step, _) in enumerate(zip(trajectory.steps, flags, strict=False))
        if step.kind is StepKind.SEARCH
    )


def _as_golds(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and value and all(isinstance(g, str) for g in value):
        return tuple(value)
    raise ValueError(f"golden_answers must be a string or a non-empty list of strings, got {value!r}")


def _completion_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    return "".join(str(message.get("content", "")) for message in completion)  # conversational: messages


# The rollout's own columns are not row fields of a trajectory (its golds, titles, ... are).
_NOT_ROW = frozenset({"completion_ids"}) | AGENT_COLUMNS


class MethodReward:
    """The TRL reward function of one method: ``MethodReward("hiprag", params={"lambda_f": 0.2})``.

    >>> reward = MethodReward("search_r1")
    >>> reward(["Q?"], ["<think>x</think><answer> Paris </answer>"], golden_answers=[["Paris"]])
    [1.0]
    """

    def __init__(
        self,
        method: str,
        *,
        params: Mapping[str, Any] | None = None,
        ledger: ScoreLedger | None = None,
        judge: JudgeFn | None = None,
    ) -> None:
        if method not in METHODS:
            raise ConfigError("method", f"unknown method {method!r}; known: {', '.join(METHODS)}")
        self.method = method
        self.params = dict(params or {})
        self.ledger = ledger if ledger is not None else ScoreLedger()
        self.judge = judge
        self.__name__ = f"{method}_reward"  # TRL names the logged reward column after it
        self._check_params()

    def _check_params(self) -> None:
        """Fail at start-up, naming the field, on a weight scoring rejects (not at the first batch)."""
        try:
            method_params(self.method, self._params_at(0, 1))
        except ScoringInputError as exc:
            if exc.field.startswith("params"):
                raise ConfigError(f"reward.{exc.field}", exc.message) from None

    def _params_at(self, step: int, total_steps: int) -> dict[str, Any]:
        if self.method != "tiresrag":
            return self.params
        # a_t's schedule (TIRESRAG §4.3): t counts rollout batches from 1, T is the run's length in steps.
        return {**self.params, "step": step + 1, "total_steps": max(total_steps, step + 1, 1)}

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        scores = self.score_samples(prompts, completions, **kwargs)
        self.ledger.record(scores)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric("reward/unscorable", float(sum(s.reward is None for s in scores)))
        return [None if s.reward is None else s.reward.total for s in scores]

    def score_samples(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[SampleScore]:
        """Score a batch as :meth:`__call__` does (same columns), without recording it in the ledger: dynamic
        sampling (:mod:`trainer.dynamic_sampling`) asks which groups have reward spread before TRL scores them."""
        n = len(completions)
        # The prompt a rollout was made from, where dynamic sampling swapped a group's question after TRL chose the
        # batch (TRL's ``prompts`` still name the question it sampled).
        prompts = list(kwargs.get("rollout_prompt") or prompts)
        texts = kwargs.get("trajectory_text") or [_completion_text(c) for c in completions]
        golds_column = kwargs.get("golden_answers")
        if golds_column is None:
            raise KeyError("the dataset needs a golden_answers column")
        given = kwargs.get("judgements") or [{} for _ in range(n)]
        extras = kwargs.get("rollout_extras") or [{} for _ in range(n)]
        state = kwargs.get("trainer_state")
        params = self._params_at(
            int(getattr(state, "global_step", 0) or 0), int(getattr(state, "max_steps", 1) or 1)
        )
        rows = [
            {
                key: values[i]
                for key, values in kwargs.items()
                if key not in _NOT_ROW and isinstance(values, list) and len(values) == n
            }
            for i in range(n)
        ]
        golds = [_as_golds(g) for g in golds_column]
        trajectories = [PARSERS[METHODS[self.method].format](text) for text in texts]
        judged = self._judge(texts, golds, trajectories, rows, given, extras)
        known = METHODS[self.method].judgements
        # One batch: HiPRAG Sec. 5.3's average bonus is taken over this generation batch.
        results = score_batch(
            self.method,
            [
                BatchItem(text, list(gold), {k: v for k, v in judgements.items() if k in known})
                for text, gold, judgements in zip(texts, golds, judged, strict=True)
            ],
            params=params,
        )
        scores = [
            self._score(
                str(prompts[i]),
                rows[i],
                texts[i],
                golds[i],
                trajectories[i],
                judged[i],
                results[i],
                extras[i],
            )
            for i in range(n)
        ]
        return scores

    def _judge(
        self,
        texts: list[str],
        golds: list[tuple[str, ...]],
        trajectories: list[Trajectory],
        rows: list[dict[str, Any]],
        given: list[Mapping[str, Any]],
        extras: list[Mapping[str, Any]],
    ) -> list[dict[str, Any]]:
        if self.judge is None:
            return [dict(g) for g in given]
        requests = [
            JudgeRequest(self.method, text, gold, trajectory, row, extra)
            for text, gold, trajectory, row, extra in zip(
                texts, golds, trajectories, rows, extras, strict=True
            )
        ]
        outcomes = list(self.judge(requests))
        if len(outcomes) != len(requests):
            raise ValueError(f"the judge returned {len(outcomes)} outcomes for {len(requests)} completions")
        return [{**dict(outcome), **dict(g)} for outcome, g in zip(outcomes, given, strict=True)]

    def _score(
        self,
        prompt: str,
        row: Mapping[str, Any],
        text: str,
        golds: tuple[str, ...],
        trajectory: Trajectory,
        judgements: Mapping[str, Any],
        result: Scored | ScoringInputError | MissingVerdict,
        extras: Mapping[str, Any],
    ) -> SampleScore:
        reward: Reward | None = None
        error: str | None = None
        if isinstance(result, Scored):
            reward = result.reward
        else:
            error = f"{type(result).__name__}: {result}"
        if reward is not None and not math.isfinite(reward.total):
            error = f"non-finite reward {reward.total!r}"
            reward = None
        answer = trajectory.answer
        over, under = search_flags(trajectory, judgements)
        return SampleScore(
            prompt=prompt,
            row=row,
            text=text,
            golds=golds,
            trajectory=trajectory,
            reward=reward,
            error=error,
            judgements=dict(judgements),
            cem=cover_exact_match(answer, golds),
            em=answer is not None and exact_match(answer, golds),
            f1=token_f1(answer, golds).f1 if answer is not None else 0.0,
            over_search=over,
            under_search=under,
            over_search_rules=over_search_rules(trajectory, judgements),
            intermediate_correct=_intermediate_correct(judgements, golds),
            extras=dict(extras),
        )


def _intermediate_correct(judgements: Mapping[str, Any], golds: Sequence[str]) -> tuple[bool, ...] | None:
    answers = judgements.get("intermediate_answers")
    if not isinstance(answers, list):
        return None
    return tuple(isinstance(a, str) and exact_match(a, golds) for a in answers)
