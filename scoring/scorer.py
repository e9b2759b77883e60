"""Score one raw trajectory with a named method: the entry point of the web API and of external reward services.

    >>> scored = score("search_r1", "<think>x</think><answer> Paris </answer>", ["Paris"])
    >>> scored.trajectory.valid, scored.reward.total
    (True, 1.0)

``params`` are the method's weights (each checked for type and range); ``judgements`` are the judge outcomes the
method needs, given by the caller as JSON values. Every problem with either raises :class:`ScoringInputError`
naming the field (``params.lambda_f``, ``judgements.step_flags[2]``); a judge outcome the reward needs but does not
have raises :class:`scoring.verdicts.MissingVerdict` naming the step. Nothing is silently defaulted to "no".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.formats import parse
from scoring.rewards.autosearch import autosearch_reward
from scoring.rewards.hiprag import hiprag_reward
from scoring.rewards.result import Reward
from scoring.rewards.searchp1 import SearchP1Evaluation, SearchP1Weights, searchp1_reward
from scoring.rewards.searchr1 import searchr1_format_reward, searchr1_outcome_reward
from scoring.rewards.tiresrag import TiresragWeights, tiresrag_reward
from scoring.trajectory import Trajectory
from scoring.verdicts import Verdict


class ScoringInputError(ValueError):
    """A parameter or judgement the caller gave is missing, of the wrong type or out of range."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Scored:
    trajectory: Trajectory
    reward: Reward


class _Inputs:
    """Typed, range-checked reads of ``params`` / ``judgements``; unknown keys are an error, not ignored."""

    def __init__(self, prefix: str, values: Mapping[str, Any] | None, known: Sequence[str]) -> None:
        self.prefix = prefix
        self.values = dict(values or {})
        unknown = sorted(set(self.values) - set(known))
        if unknown:
            raise ScoringInputError(
                f"{prefix}.{unknown[0]}", f"unknown; expected one of {', '.join(known) or 'none'}"
            )

    def field(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def number(self, name: str, default: float, low: float, high: float) -> float:
        value = self.values.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ScoringInputError(self.field(name), f"must be a finite number, got {value!r}")
        if not low <= value <= high:
            raise ScoringInputError(self.field(name), f"must lie in [{low}, {high}], got {value!r}")
        return float(value)

    def integer(self, name: str, default: int | None, low: int) -> int:
        value = self.values.get(name, default)
        if value is None:
            raise ScoringInputError(self.field(name), "is required")
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ScoringInputError(self.field(name), f"must be an integer ≥ {low}, got {value!r}")
        return value

    def choice(self, name: str, default: str, options: Sequence[str]) -> str:
        value = self.values.get(name, default)
        if value not in options:
            raise ScoringInputError(self.field(name), f"must be one of {', '.join(options)}, got {value!r}")
        return str(value)

    def verdict(self, name: str) -> Verdict | None:
        value = self.values.get(name)
        return None if value is None else _verdict(self.field(name), value)

    def verdicts(self, name: str) -> tuple[Verdict, ...]:
        """One verdict per step; a step the reward needs but the list does not reach raises MissingVerdict."""
        values = self.values.get(name, [])
        if not isinstance(values, list):
            raise ScoringInputError(self.field(name), f"must be a list, got {values!r}")
        return tuple(_verdict(f"{self.field(name)}[{i}]", v) for i, v in enumerate(values))


def _verdict(field: str, value: Any) -> Verdict:
    """JSON true/false, or a Verdict's name: "true", "false", "unparseable", "error"."""
    if isinstance(value, bool):
        return Verdict.TRUE if value else Verdict.FALSE
    try:
        return Verdict(str(value).lower())
    except ValueError:
        raise ScoringInputError(
            field, f"must be true, false, 'unparseable' or 'error', got {value!r}"
        ) from None


def _search_r1(trajectory: Trajectory, golds: Sequence[str], params: _Inputs, judged: _Inputs) -> Reward:
    if params.choice("reward", "format", ("format", "outcome")) == "outcome":
        return searchr1_outcome_reward(trajectory, golds)
    return searchr1_format_reward(
        trajectory,
        golds,
        structure_format_score=params.number("structure_format_score", 0.2, 0.0, 1.0),
        final_format_score=params.number("final_format_score", 0.1, 0.0, 1.0),
        retrieval_score=params.number("retrieval_score", 0.0, 0.0, 1.0),
    )


def _hiprag(trajectory: Trajectory, golds: Sequence[str], params: _Inputs, judged: _Inputs) -> Reward:
    process = params.choice("process", "both", ("both", "over_only", "under_only"))
    bonus = params.values.get("batch_average_bonus")
    return hiprag_reward(
        trajectory,
        golds,
        judged.verdicts("step_flags"),
        lambda_f=params.number("lambda_f", 0.2, 0.0, 1.0),
        lambda_p=params.number("lambda_p", 0.4, 0.0, 10.0),
        process=process,  # type: ignore[arg-type]  # checked by choice() above
        batch_average_bonus=None if bonus is None else params.number("batch_average_bonus", 0.0, 0.0, 10.0),
    )


def _autosearch(trajectory: Trajectory, golds: Sequence[str], params: _Inputs, judged: _Inputs) -> Reward:
    answers = judged.values.get("intermediate_answers", [])
    if not isinstance(answers, list) or not all(a is None or isinstance(a, str) for a in answers):
        raise ScoringInputError(judged.field("intermediate_answers"), "must be a list of strings (or null)")
    try:
        return autosearch_reward(trajectory, golds, answers)
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
        n_ref_steps=judged.integer("n_ref_steps", None, 0),
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
        step=params.integer("step", 0, 0),
        total_steps=params.integer("total_steps", 1, 1),
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
    spec = METHODS.get(method)
    if spec is None:
        raise ScoringInputError("method", f"unknown method {method!r}; known: {', '.join(METHODS)}")
    if isinstance(golds, str) or not golds or not all(isinstance(g, str) for g in golds):
        raise ScoringInputError("golden_answers", "must be a non-empty list of strings")
    inputs = _Inputs("params", params, spec.params)
    judged = _Inputs("judgements", judgements, spec.judgements)
    trajectory = parse(spec.format, text)
    return Scored(trajectory, spec.reward(trajectory, golds, inputs, judged))
