"""Each reward method's weights, declared once: a frozen dataclass per method, every field with its default, range,
choices and help (the paper's equation), and one reader that checks a caller's mapping against it.

    >>> parse_params(HipragParams, {"lambda_p": 0}).lambda_p
    0.0
    >>> parse_params(HipragParams, {"lambda_p": 11})
    Traceback (most recent call last):
    ...
    scoring.errors.ScoringInputError: params.lambda_p: must lie in [0.0, 10.0], got 11

:func:`parse_params` is what :func:`scoring.scorer.score` reads its weights with, and what the web app and the trainer
check a run's, an evaluation's or an API request's ``params`` with (``scoring.scorer.method_params`` picks the
method's class): the same ``ScoringInputError`` naming ``params.<field>``, unknown keys refused, numbers bounded
before any float arithmetic. :func:`param_help` describes a weight for a form from the same declarations.
:class:`JudgementInputs` reads a method's judge outcomes the same way (``judgements.<name>``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal, TypeVar, cast

from scoring.errors import ScoringInputError
from scoring.rewards.hiprag import LAMBDA_F, LAMBDA_P, PROCESSES, Process
from scoring.rewards.searchp1 import VARIANTS, SearchP1Weights, Variant
from scoring.rewards.searchr1 import FINAL_FORMAT_SCORE, STRUCTURE_FORMAT_SCORE
from scoring.rewards.tiresrag import DEFAULT_WEIGHTS, MAX_TRAINING_STEPS
from scoring.verdicts import Verdict

__all__ = [
    "AutosearchParams",
    "HipragParams",
    "Inputs",
    "JudgementInputs",
    "Param",
    "SearchP1Params",
    "SearchR1Params",
    "TiresragParams",
    "param_help",
    "param_specs",
    "parse_params",
]

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Param:
    """One weight's declaration (a dataclass field's ``metadata["param"]``)."""

    kind: Literal["number", "integer", "choice"]
    help: str
    low: float = 0.0
    high: float = 0.0
    choices: tuple[str, ...] = ()
    optional: bool = False  # absent means None (the reward then does without it)


def _number(default: float | None, low: float, high: float, help: str, *, optional: bool = False) -> Any:
    return field(default=default, metadata={"param": Param("number", help, low, high, optional=optional)})


def _integer(default: int, low: int, high: int, help: str) -> Any:
    return field(default=default, metadata={"param": Param("integer", help, low, high)})


def _choice(default: str, choices: Sequence[str], help: str) -> Any:
    return field(default=default, metadata={"param": Param("choice", help, choices=tuple(choices))})


@dataclass(frozen=True, slots=True)
class SearchR1Params:
    reward: Literal["format", "outcome"] = _choice(
        "format",
        ("format", "outcome"),
        "outcome: the paper's r = EM(a_pred, a_gold) (Search-R1 Sec. 3.4); format: v0.3's outcome + format reward",
    )
    structure_format_score: float = _number(
        STRUCTURE_FORMAT_SCORE,
        0.0,
        1.0,
        "v0.3 format reward: credit of a well-formed trajectory (qa_em_format)",
    )
    final_format_score: float = _number(
        FINAL_FORMAT_SCORE,
        0.0,
        1.0,
        "v0.3 format reward: credit of an answer without the format (qa_em_format)",
    )
    retrieval_score: float = _number(
        0.0,
        0.0,
        1.0,
        "v0.3 format reward: credit when a retrieved passage holds a gold answer (qa_em_format)",
    )

    def __post_init__(self) -> None:
        if (
            self.structure_format_score + self.retrieval_score > 1
        ):  # Search-R1's format reward stays in [0, 1]
            raise ScoringInputError(
                "params.retrieval_score",
                "structure_format_score + retrieval_score must be <= 1, "
                f"got {self.structure_format_score} + {self.retrieval_score}",
            )


@dataclass(frozen=True, slots=True)
class HipragParams:
    lambda_f: float = _number(LAMBDA_F, 0.0, 1.0, "λf, the format weight of HiPRAG Eq. 1")
    lambda_p: float = _number(LAMBDA_P, 0.0, 10.0, "λp, the process-bonus weight of HiPRAG Eq. 1")
    process: Process = _choice(  # noqa: RUF009  (a dataclasses.field with the declaration)
        "both",
        PROCESSES,
        "the steps Eq. 1's bonus counts: both, or Sec. 5.3's over_only / under_only ablations",
    )
    batch_average_bonus: float | None = _number(
        None,
        0.0,
        10.0,
        "the batch's average λp-weighted bonus (Sec. 5.3), for a trajectory without a step of the evaluated type",
        optional=True,
    )


@dataclass(frozen=True, slots=True)
class AutosearchParams:
    """AutoSearch's Eq. 1 has no weight to set."""


_SEARCH_P1 = SearchP1Weights()


@dataclass(frozen=True, slots=True)
class SearchP1Params:
    lambda_f: float = _number(_SEARCH_P1.lambda_f, 0.0, 1.0, "λf, the format weight of Search-P1 Eq. 4")
    lambda_p: float = _number(_SEARCH_P1.lambda_p, 0.0, 1.0, "λp, the path-reward weight of Search-P1 Eq. 4")
    lambda_a: float = _number(_SEARCH_P1.lambda_a, 0.0, 1.0, "λa, the outcome weight of Search-P1 Eq. 4")
    alpha: float = _number(
        _SEARCH_P1.alpha, 0.0, 1.0, "α, the accuracy share of a wrong answer's credit (Eq. 8)"
    )
    variant: Variant = _choice(  # noqa: RUF009  (a dataclasses.field with the declaration)
        "main", VARIANTS, "main: Eqs. 6–7 with their efficiency ratios; alg3: Algorithm 3, lines 15 and 18"
    )

    def weights(self) -> SearchP1Weights:
        return SearchP1Weights(self.lambda_f, self.lambda_p, self.lambda_a, self.alpha)


@dataclass(frozen=True, slots=True)
class TiresragParams:
    step: int = _integer(0, 0, MAX_TRAINING_STEPS, "t, the training step of a_t (TIRESRAG-R1 §4.3)")
    total_steps: int = _integer(1, 1, MAX_TRAINING_STEPS, "T, the run's training steps of a_t (§4.3)")
    w_thinking: float = _number(
        DEFAULT_WEIGHTS.thinking, 0.0, 10.0, "w_t, the thinking reward's weight (Eq. 5)"
    )
    w_sufficiency: float = _number(
        DEFAULT_WEIGHTS.sufficiency, 0.0, 10.0, "w_s, the sufficiency reward's weight (Eq. 5)"
    )
    w_reflection: float = _number(
        DEFAULT_WEIGHTS.reflection, 0.0, 10.0, "w_r, the reflection reward's weight (Eq. 5)"
    )


def param_specs(params_type: type) -> dict[str, tuple[Any, Param]]:
    """Each weight of a params class, in order: name -> (default, declaration)."""
    return {
        f.name: (None if f.default is MISSING else f.default, f.metadata["param"])
        for f in fields(params_type)
    }


def param_help(params_type: type, name: str) -> str:
    """One line for a form: the weight's help, default and range (or choices)."""
    default, spec = param_specs(params_type)[name]
    if spec.kind == "choice":
        allowed = " | ".join(spec.choices)
    elif spec.kind == "integer":
        allowed = f"[{int(spec.low)}, {int(spec.high)}]"
    else:
        allowed = f"[{spec.low:g}, {spec.high:g}]"
    shown = "none" if default is None else f"{default:g}" if isinstance(default, float) else str(default)
    return f"{spec.help}; default {shown}, {allowed}"


def parse_params(params_type: type[P], values: Mapping[str, Any] | None, *, prefix: str = "params") -> P:
    """``values`` checked against ``params_type``: every key known, every value typed and in range.

    Raises :class:`ScoringInputError` naming ``<prefix>.<field>`` (``params.lambda_p``), or ``<prefix>`` for a
    ``values`` that is not a mapping. A field that is absent takes its default.
    """
    specs = param_specs(params_type)
    inputs = Inputs(prefix, values, tuple(specs))
    read: dict[str, Any] = {}
    for name, (default, spec) in specs.items():
        if spec.optional and inputs.values.get(name) is None:
            read[name] = None
        elif spec.kind == "choice":
            read[name] = inputs.choice(name, default, spec.choices)
        elif spec.kind == "integer":
            read[name] = inputs.integer(name, default, int(spec.low), int(spec.high))
        else:
            read[name] = inputs.number(name, default, spec.low, spec.high)
    return params_type(**read)


class Inputs:
    """Typed, range-checked reads of a JSON object (``params``, ``judgements``); unknown keys are an error."""

    def __init__(self, prefix: str, values: Mapping[str, Any] | None, known: Sequence[str]) -> None:
        self.prefix = prefix
        if type(values) is dict and not values.keys() - known:
            # The shape a trainer and the web API pass, every key known: read in place (nothing here writes to
            # it). Anything else takes the full check below, which copies and names the first unknown key.
            self.values: dict[Any, Any] = values
            return
        if values is not None and not isinstance(values, Mapping):
            raise ScoringInputError(prefix, f"must be an object, got {type(values).__name__}")
        self.values = dict(values) if values else {}
        if self.values.keys() - set(known):  # a key not a string is never known: the checks run only then
            for key in self.values:
                if not isinstance(key, str):
                    raise ScoringInputError(prefix, f"keys must be strings, got {shown(key)}")
            unknown = sorted(key[:60] for key in set(self.values) - set(known))
            raise ScoringInputError(
                f"{prefix}.{unknown[0]}", f"unknown; expected one of {', '.join(known) or 'none'}"
            )

    def field(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def number(self, name: str, default: float, low: float, high: float) -> float:
        value = self.values.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScoringInputError(self.field(name), f"must be a finite number, got {shown(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ScoringInputError(self.field(name), f"must be a finite number, got {value!r}")
        # Python compares an int with a float exactly, so a huge int (10**400) is refused here, before float()
        # could overflow.
        if not low <= value <= high:
            raise ScoringInputError(self.field(name), f"must lie in [{low}, {high}], got {shown(value)}")
        return float(value)

    def integer(self, name: str, default: int | None, low: int, high: int) -> int:
        value = self.values.get(name, default)
        if value is None:
            raise ScoringInputError(self.field(name), "is required")
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ScoringInputError(
                self.field(name), f"must be an integer in [{low}, {high}], got {shown(value)}"
            )
        return value

    def choice(self, name: str, default: str, options: Sequence[str]) -> str:
        value = self.values.get(name, default)
        if value not in options:
            raise ScoringInputError(
                self.field(name), f"must be one of {', '.join(options)}, got {shown(value)}"
            )
        return str(value)


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: an error message never echoes a 400-digit number whole (and
    never hits Python's int-to-str digit limit)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"an integer of about {value.bit_length() * 30103 // 100000 + 1} digits"
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # nested too deep, or a huge int inside a container
        return f"a {type(value).__name__} too large to show"
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


class JudgementInputs(Inputs):
    """:class:`Inputs` with the judge outcomes' reads (a method's ``judgements``): verdicts by name or as JSON
    booleans."""

    def verdict(self, name: str) -> Verdict | None:
        value = self.values.get(name)
        return None if value is None else _verdict(self.field(name), value)

    def verdicts(self, name: str) -> tuple[Verdict, ...]:
        """One verdict per step; a step the reward needs but the list does not reach raises MissingVerdict."""
        values = self.values.get(name, [])
        if not isinstance(values, list):
            raise ScoringInputError(self.field(name), f"must be a list, got {shown(values)}")
        if set(map(type, values)) <= _BOOL:  # all JSON true/false, the common shape: no call per value
            return tuple(map(_BOOL_VERDICTS.__getitem__, values))
        read = tuple(map(_read_verdict, values))
        if None in read:  # the field named only for the first value that is no verdict
            i = read.index(None)
            _verdict(f"{self.field(name)}[{i}]", values[i])
        return cast(tuple[Verdict, ...], read)  # no None left


_VERDICTS: dict[Any, Verdict] = {True: Verdict.TRUE, False: Verdict.FALSE, **{v.value: v for v in Verdict}}
_BOOL_VERDICTS: dict[bool, Verdict] = {True: Verdict.TRUE, False: Verdict.FALSE}
_BOOL = frozenset({bool})


def _read_verdict(value: Any) -> Verdict | None:
    """JSON true/false, or a Verdict's name in any case ("true", "False", "unparseable", "error"); else None."""
    if isinstance(value, bool):
        return _VERDICTS[value]
    return _VERDICTS.get(value.lower()) if isinstance(value, str) else None


def _verdict(field: str, value: Any) -> Verdict:
    """:func:`_read_verdict`, or :class:`ScoringInputError` naming ``field``."""
    verdict = _read_verdict(value)
    if verdict is None:
        raise ScoringInputError(field, f"must be true, false, 'unparseable' or 'error', got {shown(value)}")
    return verdict
