"""Score one raw trajectory with a named method: the entry point of the web API and of external reward services.

    >>> scored = score("search_r1", "<think>x</think><answer> Paris </answer>", ["Paris"])
    >>> scored.trajectory.valid, scored.reward.total
    (True, 1.0)

``params`` are the method's weights (each checked for type and range); ``judgements`` are the judge outcomes the
method needs, given by the caller as JSON values. Every problem with either raises :class:`ScoringInputError`
naming the field (``params.lambda_f``, ``judgements.step_flags[2]``, ``judgements.step_flags: 2 verdicts for 1
steps``); a judge outcome the reward needs but does not have raises :class:`scoring.verdicts.MissingVerdict` naming
the step. Nothing is silently defaulted to "no", and nothing raises a bare ``ValueError``.

:func:`score_batch` scores a batch with shared ``params``: each item gets its :class:`Scored` or its typed error, and
HiPRAG's Sec. 5.3 ablations (``process`` = ``over_only`` / ``under_only``) give a trajectory without a step of the
evaluated type the batch's average bonus (:func:`scoring.rewards.hiprag.average_earned_bonus`). Trainers and the
web API score rollout batches with it; ``score`` alone raises :class:`BatchAverageRequired` for such a trajectory
unless ``params.batch_average_bonus`` is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.errors import BatchAverageRequired, ScoringInputError
from scoring.formats import parse
from scoring.rewards.autosearch import autosearch_reward
from scoring.rewards.hiprag import average_earned_bonus, hiprag_reward
from scoring.rewards.result import Reward
from scoring.rewards.searchp1 import MAX_STEP_COUNT, SearchP1Evaluation, SearchP1Weights, searchp1_reward
from scoring.rewards.searchr1 import searchr1_format_reward, searchr1_outcome_reward
from scoring.rewards.tiresrag import MAX_TRAINING_STEPS, TiresragWeights, tiresrag_reward
from scoring.trajectory import Trajectory
from scoring.verdicts import MissingVerdict, Verdict

__all__ = [
    "METHODS",
    "BatchAverageRequired",
    "BatchItem",
    "MissingVerdict",
    "Scored",
    "ScoringError",
    "ScoringInputError",
    "score",
    "score_batch",
]

ScoringError = ScoringInputError | MissingVerdict
"""What scoring one item can fail with: a caller's input (field named) or a judge outcome the reward needs."""


@dataclass(frozen=True, slots=True)
class Scored:
    trajectory: Trajectory
    reward: Reward


class _Inputs:
    """Typed, range-checked reads of ``params`` / ``judgements``; unknown keys are an error, not ignored."""

    def __init__(self, prefix: str, values: Mapping[str, Any] | None, known: Sequence[str]) -> None:
        self.prefix = prefix
        if values is not None and not isinstance(values, Mapping):
            raise ScoringInputError(prefix, f"must be an object, got {type(values).__name__}")
        self.values = dict(values or {})
        for key in self.values:
            if not isinstance(key, str):
                raise ScoringInputError(prefix, f"keys must be strings, got {_shown(key)}")
        unknown = sorted(key[:60] for key in set(self.values) - set(known))
        if unknown:
            raise ScoringInputError(
                f"{prefix}.{unknown[0]}", f"unknown; expected one of {', '.join(known) or 'none'}"
            )

    def field(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def number(self, name: str, default: float, low: float, high: float) -> float:
        value = self.values.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScoringInputError(self.field(name), f"must be a finite number, got {_shown(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ScoringInputError(self.field(name), f"must be a finite number, got {value!r}")
        # Python compares an int with a float exactly, so a huge int (10**400) is refused here, before float()
        # could overflow.
        if not low <= value <= high:
            raise ScoringInputError(self.field(name), f"must lie in [{low}, {high}], got {_shown(value)}")
        return float(value)

    def integer(self, name: str, default: int | None, low: int, high: int) -> int:
        value = self.values.get(name, default)
        if value is None:
            raise ScoringInputError(self.field(name), "is required")
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ScoringInputError(
                self.field(name), f"must be an integer in [{low}, {high}], got {_shown(value)}"
            )
        return value

    def choice(self, name: str, default: str, options: Sequence[str]) -> str:
        value = self.values.get(name, default)
        if value not in options:
            raise ScoringInputError(
                self.field(name), f"must be one of {', '.join(options)}, got {_shown(value)}"
            )
        return str(value)

    def verdict(self, name: str) -> Verdict | None:
        value = self.values.get(name)
        return None if value is None else _verdict(self.field(name), value)

    def verdicts(self, name: str) -> tuple[Verdict, ...]:
        """One verdict per step; a step the reward needs but the list does not reach raises MissingVerdict."""
        values = self.values.get(name, [])
        if not isinstance(values, list):
            raise ScoringInputError(self.field(name), f"must be a list, got {_shown(values)}")
        return tuple(_verdict(f"{self.field(name)}[{i}]", v) for i, v in enumerate(values))


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: an error message never echoes a 400-digit number whole (and
    never hits Python's int-to-str digit limit)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"an integer of about {value.bit_length() * 30103 // 100000 + 1} digits"
    try:
        shown = repr(value)
    except (RecursionError, ValueError):  # nested too deep, or a huge int inside a container
        return f"a {type(value).__name__} too large to show"
    return shown if len(shown) <= limit else f"{shown[: limit - 1]}…"


def _verdict(field: str, value: Any) -> Verdict:
    """JSON true/false, or a Verdict's name: "true", "false", "unparseable", "error"."""
    if isinstance(value, bool):
        return Verdict.TRUE if value else Verdict.FALSE
    try:
        return Verdict(value.lower() if isinstance(value, str) else "")
    except ValueError:
        raise ScoringInputError(
            field, f"must be true, false, 'unparseable' or 'error', got {_shown(value)}"
        ) from None


def _search_r1(trajectory: Trajectory, golds: Sequence[str], params: _Inputs, judged: _Inputs) -> Reward:
    if params.choice("reward", "format", ("format", "outcome")) == "outcome":
        return searchr1_outcome_reward(trajectory, golds)
    structure = params.number("structure_format_score", 0.2, 0.0, 1.0)
    retrieval = params.number("retrieval_score", 0.0, 0.0, 1.0)
    if structure + retrieval > 1:  # Search-R1's format reward stays within [0, 1]
        raise ScoringInputError(
            params.field("retrieval_score"),
            f"structure_format_score + retrieval_score must be <= 1, got {structure} + {retrieval}",
        )
    return searchr1_format_reward(
        trajectory,
        golds,
        structure_format_score=structure,
        final_format_score=params.number("final_format_score", 0.1, 0.0, 1.0),
        retrieval_score=retrieval,
    )


def _hiprag(trajectory: Trajectory, golds: Sequence[str], params: _Inputs, judged: _Inputs) -> Reward:
    process = params.choice("process", "both", ("both", "over_only", "under_only"))
    bonus = params.values.get("batch_average_bonus")
    flags = judged.verdicts("step_flags")
    if len(flags) > len(trajectory.steps):
        raise ScoringInputError(
            judged.field("step_flags"), f"{len(flags)} verdicts for {len(trajectory.steps)} steps"
        )
    try:
        return hiprag_reward(
            trajectory,
            golds,
            flags,
            lambda_f=params.number("lambda_f", 0.2, 0.0, 1.0),
            lambda_p=params.number("lambda_p", 0.4, 0.0, 10.0),
            process=process,  # type: ignore[arg-type]  # checked by choice() above
            batch_average_bonus=None
            if bonus is None
            else params.number("batch_average_bonus", 0.0, 0.0, 10.0),
        )
    except BatchAverageRequired as exc:  # HiPRAG Sec. 5.3: only the batch knows its average bonus
        raise BatchAverageRequired(params.field("batch_average_bonus"), exc.message) from None
    except ScoringInputError as exc:
        fields = {"step_flags": judged.field("step_flags"), "process": params.field("process")}
        raise ScoringInputError(fields.get(exc.field, exc.field), exc.message) from None


def _autosearch(trajectory: Trajectory, golds: Sequence[str], params: _Inputs, judged: _Inputs) -> Reward:
    answers = judged.values.get("intermediate_answers", [])
    if not isinstance(answers, list) or not all(a is None or isinstance(a, str) for a in answers):
        raise ScoringInputError(judged.field("intermediate_answers"), "must be a list of strings (or null)")
    try:
        return autosearch_reward(trajectory, golds, answers)
    except ScoringInputError:
        raise
    except ValueError as exc:  # the count does not match the trajectory's retrieval steps
        raise ScoringInputError(judged.field("intermediate_answers"), str(exc)) from None


def _search_p1(trajectory: Trajectory, golds: Sequence[str], params: _Inputs, judged: _Inputs) -> Reward:
    raw = judged.values.get("evaluation")
    evaluation = None
    if raw is not None:
        if not isinstance(raw, Mapping):
            raise ScoringInputError(judged.field("evaluation"), "must be an object of the evaluator's fields")
        try:
            evaluation = SearchP1Evaluation(**raw)
        except (TypeError, ValueError) as exc:
            raise ScoringInputError(judged.field("evaluation"), str(exc)) from None
    weights = SearchP1Weights(
        lambda_f=params.number("lambda_f", 0.1, 0.0, 1.0),
        lambda_p=params.number("lambda_p", 0.3, 0.0, 1.0),
        lambda_a=params.number("lambda_a", 0.6, 0.0, 1.0),
        alpha=params.number("alpha", 0.8, 0.0, 1.0),
    )
    return searchp1_reward(
        trajectory,
        golds,
        evaluation,
        n_ref_steps=judged.integer("n_ref_steps", None, 0, MAX_STEP_COUNT),
        variant=params.choice("variant", "main", ("main", "alg3")),  # type: ignore[arg-type]
        weights=weights,
    )


def _tiresrag(trajectory: Trajectory, golds: Sequence[str], params: _Inputs, judged: _Inputs) -> Reward:
    thinking_raw = judged.values.get("thinking")
    thinking: float | Verdict | None
    if isinstance(thinking_raw, int | float) and not isinstance(thinking_raw, bool):
        thinking = judged.number("thinking", 0.0, 0.0, 1.0)
    else:
        thinking = judged.verdict("thinking")
    return tiresrag_reward(
        trajectory,
        golds,
        sufficiency=judged.verdict("sufficiency"),
        thinking=thinking,
        step=params.integer("step", 0, 0, MAX_TRAINING_STEPS),
        total_steps=params.integer("total_steps", 1, 1, MAX_TRAINING_STEPS),
        weights=TiresragWeights(
            thinking=params.number("w_thinking", 0.6, 0.0, 10.0),
            sufficiency=params.number("w_sufficiency", 0.3, 0.0, 10.0),
            reflection=params.number("w_reflection", 0.3, 0.0, 10.0),
        ),
    )


@dataclass(frozen=True, slots=True)
class Method:
    format: str
    params: tuple[str, ...]
    judgements: tuple[str, ...]
    reward: Callable[[Trajectory, Sequence[str], _Inputs, _Inputs], Reward]


METHODS: dict[str, Method] = {
    "search_r1": Method(
        "search_r1",
        ("reward", "structure_format_score", "final_format_score", "retrieval_score"),
        (),
        _search_r1,
    ),
    "hiprag": Method(
        "hiprag", ("lambda_f", "lambda_p", "process", "batch_average_bonus"), ("step_flags",), _hiprag
    ),
    "autosearch": Method("autosearch", (), ("intermediate_answers",), _autosearch),
    "search_p1": Method(
        "search_p1",
        ("lambda_f", "lambda_p", "lambda_a", "alpha", "variant"),
        ("evaluation", "n_ref_steps"),
        _search_p1,
    ),
    "tiresrag": Method(
        "tiresrag",
        ("step", "total_steps", "w_thinking", "w_sufficiency", "w_reflection"),
        ("sufficiency", "thinking"),
        _tiresrag,
    ),
}


def score(
    method: str,
    text: str,
    golds: Sequence[str],
    *,
    params: Mapping[str, Any] | None = None,
    judgements: Mapping[str, Any] | None = None,
) -> Scored:
    """Parse ``text`` in the method's format and compute its paper-mode reward."""
    spec = _method(method)
    if not isinstance(text, str):
        raise ScoringInputError("response", f"must be a string, got {type(text).__name__}")
    if (
        isinstance(golds, str)
        or not isinstance(golds, Sequence)
        or not golds
        or not all(isinstance(g, str) for g in golds)
    ):
        raise ScoringInputError("golden_answers", "must be a non-empty list of strings")
    inputs = _Inputs("params", params, spec.params)
    judged = _Inputs("judgements", judgements, spec.judgements)
    trajectory = parse(spec.format, text)
    try:
        reward = spec.reward(trajectory, golds, inputs, judged)
    except (ScoringInputError, MissingVerdict):
        raise
    except ValueError as exc:  # a reward's own check the field checks above did not anticipate: still typed
        raise ScoringInputError("input", f"{method}: {exc}") from None
    return Scored(trajectory, reward)


def _method(method: str) -> Method:
    spec = METHODS.get(method) if isinstance(method, str) else None
    if spec is None:
        raise ScoringInputError("method", f"unknown method {method!r}; known: {', '.join(METHODS)}")
    return spec


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One trajectory of a batch: its raw text, gold answers and judge outcomes (``score``'s arguments)."""

    text: str
    golds: Sequence[str]
    judgements: Mapping[str, Any] | None = None


def score_batch(
    method: str, items: Sequence[BatchItem], *, params: Mapping[str, Any] | None = None
) -> list[Scored | ScoringError]:
    """:func:`score` over a batch sharing ``params``: one :class:`Scored` or typed error per item, in order.

    HiPRAG Sec. 5.3 ("If a trajectory contains zero steps of the evaluated type, we set the process bonus to the
    average bonus within the current training batch"): with ``process`` = ``over_only`` / ``under_only`` and no
    ``params.batch_average_bonus`` given, a trajectory whose bonus is due (A = F = 1, Eq. 1's gate) but which has
    no step of the evaluated type gets :func:`~scoring.rewards.hiprag.average_earned_bonus` of the batch — the mean
    λp·N_corr/N over the items that earned a bonus of their own (0 when none did). Items whose scoring failed
    (a missing verdict) are in neither the average nor its denominator.
    """
    _method(method)
    results: list[Scored | ScoringError] = [_score_item(method, item, params) for item in items]
    pending = [i for i, r in enumerate(results) if isinstance(r, BatchAverageRequired)]
    if pending:
        average = average_earned_bonus(r.reward for r in results if isinstance(r, Scored))
        filled = {**dict(params or {}), "batch_average_bonus": average}
        for i in pending:
            results[i] = _score_item(method, items[i], filled)
    return results


def _score_item(method: str, item: BatchItem, params: Mapping[str, Any] | None) -> Scored | ScoringError:
    try:
        return score(method, item.text, item.golds, params=params, judgements=item.judgements)
    except (ScoringInputError, MissingVerdict) as exc:
        return exc
