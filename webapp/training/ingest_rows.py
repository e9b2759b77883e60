"""Checking what a trainer reports, row by row, before any of it is stored (``webapp.training.ingest``).

Each metric row and each sample is checked on its own: a valid row is stored whatever its neighbours hold, and a
refused row is answered with where it was (``kind``, ``index``), which field and why, so the client can keep it in
its dead-letter file. Nothing here raises on any JSON value a client can send (strings where numbers belong, 2**63,
1e20, NaN, nesting); no Django, so the checks are tested as plain functions.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any

MAX_STEP = (
    2**31 - 1
)  # MetricPoint.step and Trajectory.training_step are PositiveIntegerFields (PostgreSQL integer)
# A metric's wall time: 1970 to the year 3000 in Unix seconds (datetime.fromtimestamp's range is platform-bound).
MIN_TIME = 0.0
MAX_TIME = 32_503_680_000.0
METRIC_KEY_LENGTH = 100  # MetricPoint.key
SAMPLE_KEY_LENGTH = 200  # IngestedSample.key
END_REASON_LENGTH = 32  # Trajectory.end_reason
MAX_CUT_TURNS = 32_767  # Trajectory.cut_turns, a PositiveSmallIntegerField
MAX_STEPS_PER_SAMPLE = 10_000
OUTCOMES = ("true", "false", "error")


@dataclass(frozen=True)
class Refusal:
    """A row that was not stored: ``kind`` ("metrics", "samples" or "batch"), its index in that list, the field
    (a path such as ``row.steps[0].verdicts[1]``), the reason, and a sample's idempotency key."""

    kind: str
    index: int | None
    field: str
    reason: str
    key: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k == "index"}


class RowError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _shown(value: Any) -> str:
    text = (
        repr(value)
        if not isinstance(value, int) or abs(value) < 10**30
        else f"an integer of {len(str(value))} digits"
    )
    return text if len(text) <= 60 else text[:57] + "..."


def finite_number(value: Any, field: str) -> float:
    """``value`` as a finite float: an int or float (not a bool), not NaN/inf, not an integer beyond float range."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RowError(field, f"must be a number, got {_shown(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise RowError(field, f"is out of range ({_shown(value)})") from None
    if not math.isfinite(number):
        raise RowError(field, f"must be a finite number, got {_shown(value)}")
    return number


def bounded_int(value: Any, field: str, *, low: int = 0, high: int = MAX_STEP) -> int:
    """``value`` as an integer in [low, high]; a float with an integral value counts (JSON has one number type)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RowError(field, f"must be an integer, got {_shown(value)}")
    if not low <= value <= high:
        raise RowError(field, f"must be between {low} and {high}, got {_shown(value)}")
    return value


def short_text(value: Any, field: str, limit: int, *, required: bool = True) -> str:
    if not isinstance(value, str) or (required and not value):
        raise RowError(field, f"must be a non-empty string, got {_shown(value)}")
    if len(value) > limit:
        raise RowError(field, f"is longer than {limit} characters ({len(value)})")
    return value


def check_metric(row: Any) -> dict[str, Any]:
    """A metric row ``{"step", "key", "value", "time"}`` checked and normalised, or :class:`RowError`."""
    if not isinstance(row, Mapping):
        raise RowError("", f"a metric row must be a JSON object, got {_shown(row)}")
    for name in ("step", "key", "value", "time"):
        if name not in row:
            raise RowError(name, "is missing")
    step = bounded_int(row["step"], "step")
    key = short_text(row["key"], "key", METRIC_KEY_LENGTH)
    value = finite_number(row["value"], "value")
    when = finite_number(row["time"], "time")
    if not MIN_TIME <= when <= MAX_TIME:
        raise RowError(
            "time", f"must be Unix seconds between {MIN_TIME:.0f} and {MAX_TIME:.0f}, got {when!r}"
        )
    return {"step": step, "key": key, "value": value, "time": when}


def _optional_number(row: Mapping[str, Any], name: str) -> None:
    if row.get(name) is not None:
        finite_number(row[name], f"row.{name}")


def check_sample_row(row: Any, *, known_steps: Collection[int], detectors: Collection[str]) -> None:
    """Raise :class:`RowError` for the first field of a samples.jsonl row (trainer.callbacks.sample_row) that
    cannot be stored. ``known_steps`` are the step indices of the parsed text; ``detectors`` the verdicts' kinds."""
    if not isinstance(row, Mapping):
        raise RowError("row", f"must be a JSON object, got {_shown(row)}")
    if not isinstance(row.get("text"), str):
        raise RowError("row.text", f"must be a string, got {_shown(row.get('text'))}")
    if row.get("step") is not None:
        bounded_int(row["step"], "row.step")
    _optional_number(row, "reward")
    qid = row.get("question_id")
    if qid is not None and (isinstance(qid, bool) or not isinstance(qid, str | int)):
        raise RowError("row.question_id", f"must be a string, got {_shown(qid)}")
    if row.get("question") is not None and not isinstance(row["question"], str):
        raise RowError("row.question", f"must be a string, got {_shown(row['question'])}")
    golds = row.get("golden_answers")
    if golds is not None:
        if not isinstance(golds, list):
            raise RowError("row.golden_answers", f"must be a list, got {_shown(golds)}")
        for i, gold in enumerate(golds):
            if not isinstance(gold, str | int | float) or isinstance(gold, bool):
                raise RowError(f"row.golden_answers[{i}]", f"must be a string, got {_shown(gold)}")
    components = row.get("components")
    if components is not None:
        if not isinstance(components, Mapping):
            raise RowError("row.components", f"must be a JSON object, got {_shown(components)}")
        for name, value in components.items():
            finite_number(value, f"row.components.{name}")
    rewards = row.get("step_rewards")
    if rewards is not None:
        if not isinstance(rewards, list):
            raise RowError("row.step_rewards", f"must be a list, got {_shown(rewards)}")
        for i, value in enumerate(rewards):
            finite_number(value, f"row.step_rewards[{i}]")
    if row.get("end") is not None:
        short_text(row["end"], "row.end", END_REASON_LENGTH, required=False)
    if row.get("cut_turns") is not None:
        bounded_int(row["cut_turns"], "row.cut_turns", high=MAX_CUT_TURNS)
    steps = row.get("steps")
    if steps is None:
        return
    if not isinstance(steps, list):
        raise RowError("row.steps", f"must be a list, got {_shown(steps)}")
    if len(steps) > MAX_STEPS_PER_SAMPLE:
        raise RowError("row.steps", f"holds more than {MAX_STEPS_PER_SAMPLE} steps")
    for i, step in enumerate(steps):
        where = f"row.steps[{i}]"
        if not isinstance(step, Mapping):
            raise RowError(where, f"must be a JSON object, got {_shown(step)}")
        verdicts = step.get("verdicts")
        if verdicts is None or verdicts == []:
            continue
        if not isinstance(verdicts, list):
            raise RowError(f"{where}.verdicts", f"must be a list, got {_shown(verdicts)}")
        index = step.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index not in known_steps:
            shown = f"0 to {max(known_steps)}" if known_steps else "none"
            raise RowError(
                f"{where}.index", f"{_shown(index)} is not a step of the sample's text (its steps: {shown})"
            )
        seen: set[str] = set()
        for j, verdict in enumerate(verdicts):
            at = f"{where}.verdicts[{j}]"
            if not isinstance(verdict, Mapping):
                raise RowError(at, f"must be a JSON object, got {_shown(verdict)}")
            detector = verdict.get("detector")
            if detector not in detectors:
                raise RowError(
                    f"{at}.detector", f"must be one of {', '.join(sorted(detectors))}, got {_shown(detector)}"
                )
            if detector in seen:
                raise RowError(f"{at}.detector", f"{detector} is given twice for this step")
            seen.add(detector)
            outcome = verdict.get("outcome", "error")
            if not isinstance(outcome, str | bool):
                raise RowError(f"{at}.outcome", f"must be a string, got {_shown(outcome)}")


def check_sample(sample: Any, *, known_steps: Collection[int], detectors: Collection[str]) -> tuple[str, Any]:
    """A sample ``{"key", "row"}``: its key and row, or :class:`RowError`."""
    if not isinstance(sample, Mapping):
        raise RowError("", f"a sample must be a JSON object with key and row, got {_shown(sample)}")
    key = short_text(sample.get("key"), "key", SAMPLE_KEY_LENGTH)
    check_sample_row(sample.get("row"), known_steps=known_steps, detectors=detectors)
    return key, sample["row"]


def sample_key_of(sample: Any) -> str | None:
    """A sample's key when it has a usable one (to name it in a refusal)."""
    if isinstance(sample, Mapping) and isinstance(sample.get("key"), str):
        return str(sample["key"])[:SAMPLE_KEY_LENGTH]
    return None
