"""Fuzz of ``scoring.scorer.score``: mutated trajectories of every method with fuzzed ``params`` and ``judgements``.

Each input is one call of ``score(method, text, golds, params=..., judgements=...)`` (one in 20 goes through
``score_batch`` with a few siblings). The values are drawn from what a hostile or buggy client sends: numbers at and
beyond their ranges (10**400, 2**63, 1e308, inf, NaN, -0.0), the wrong JSON types, deeply nested lists, unknown keys,
verdict lists longer and shorter than the trajectory, evaluator replies with broken counts, texts with tags
deleted, repeated, truncated or carrying lone surrogates.

The only outcomes allowed are a :class:`~scoring.scorer.Scored` with a finite reward (total, components, step
rewards) or a typed error: ``ScoringInputError`` (``BatchAverageRequired`` is one) or ``MissingVerdict``. The
script prints how many inputs ended otherwise (target 0), by exception type with one example each, and the time:

    .venv/bin/python bench/fuzz_scoring.py              # 100,000 inputs, seed 0
    .venv/bin/python bench/fuzz_scoring.py -n 20000 --seed 3

Exit status 1 when any input ended otherwise.
"""

from __future__ import annotations

import argparse
import math
import random
import reprlib
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scoring.errors import BatchAverageRequired, ScoringInputError
from scoring.scorer import METHODS, BatchItem, Scored, score, score_batch
from scoring.verdicts import MissingVerdict

ALLOWED = (ScoringInputError, BatchAverageRequired, MissingVerdict)

GOLD = "James Cameron"
SAMPLES: dict[str, list[str]] = {
    "search_r1": [
        "<think>need it</think>\n<search> Titanic director </search>\n\n<information>Doc 1(Title: Titanic) James "
        "Cameron</information>\n\n<think>found</think>\n<answer> James Cameron </answer>",
        "<think>x</think><answer>Paris</answer>",
    ],
    "hiprag": [
        "<think>\n<step>\n<reasoning>who directed it</reasoning>\n<search>Titanic director</search>\n"
        "<context>Doc 1(Title: Titanic) directed by James Cameron</context>\n<conclusion>James Cameron</conclusion>"
        "\n</step>\n<step>\n<reasoning>so</reasoning>\n<conclusion>James Cameron</conclusion>\n</step>\n</think>\n"
        "<answer>James Cameron</answer>",
        "<think><step><reasoning>r</reasoning><conclusion>c</conclusion></step></think><answer>x</answer>",
    ],
    "autosearch": [
        "<think>plan</think><search>Titanic director</search><documents>James Cameron</documents>"
        "<think>found</think><answer>James Cameron</answer>",
        "<think>x</think><answer>James Cameron</answer>",
    ],
    "search_p1": [
        '<think>plan: find the director</think><tool_call>{"name": "search", "arguments": {"query": '
        '"Titanic director"}}</tool_call><tool_response>James Cameron</tool_response>'
        "<think>done</think><answer>James Cameron</answer>",
        "<answer>James Cameron</answer>",
    ],
    "tiresrag": [
        "<think>x</think><search>Titanic director</search><information>James Cameron</information>"
        "<think>y</think><answer>Dan</answer><think>reflect</think><answer>James Cameron</answer>",
        "<think>x</think><answer>James Cameron</answer>",
    ],
}
TAGS = (
    "<think>", "</think>", "<search>", "</search>", "<information>", "</information>", "<answer>", "</answer>",
    "<step>", "</step>", "<reasoning>", "</reasoning>", "<conclusion>", "</conclusion>", "<context>",
    "</context>", "<documents>", "</documents>", "<tool_call>", "</tool_call>", "<tool_response>",
    "</tool_response>", "{", "}", '"', "\\", "\ud800", "\x00", "\u202e", "é", "\n", " ",
)  # fmt: skip


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# Values at and beyond every range, and of every JSON type (plus a few only Python callers can send).
WEIRD: tuple[Any, ...] = (
    0, 1, -1, 2, 0.0, -0.0, 0.5, 1.0, 1.2, 1.2000001, 9.99, 10, 10.5, 100, 2**31, 2**53 + 1, 2**63, 2**64,
    10**20, 10**400, -(10**400), 10**5000, 1e308, -1e308, 5e-324, math.inf, -math.inf, math.nan,
    True, False, None, "", "0.2", "true", "false", "error", "unparseable", "TRUE", "nan", "1e999", "\ud800",
    "x" * 10_000, [], [1], [True, False], {}, {"a": 1}, _nested(2000), 10**30 + 0.0,
)  # fmt: skip
VERDICTS: tuple[Any, ...] = (
    True,
    False,
    "true",
    "false",
    "unparseable",
    "error",
    "True",
    None,
    1,
    0,
    10**400,
    [],
)


class _Rng(random.Random):
    """``random.Random`` with this input's share of weird values (none, a few, many: each input draws its own)."""

    weird_share = 0.3

    def weird(self, share: float = 1.0) -> bool:
        return self.random() < self.weird_share * share


def _weird(rng: random.Random) -> Any:
    return rng.choice(WEIRD)


def _mutate_text(rng: _Rng, text: str) -> str:
    for _ in range(rng.randrange(0, 5) if rng.random() < 0.7 else 0):
        roll = rng.random()
        i = rng.randrange(len(text) + 1)
        if roll < 0.3:
            text = text[:i] + rng.choice(TAGS) + text[i:]
        elif roll < 0.55 and text:
            j = min(len(text), i + rng.randrange(1, 30))
            text = text[:i] + text[j:]
        elif roll < 0.7:
            text = text[:i]
        elif roll < 0.85:
            text = text * rng.randrange(2, 4)
        else:
            text = text[:i] + rng.choice(TAGS) * rng.randrange(1, 50) + text[i:]
    return text


def _golds(rng: _Rng) -> Any:
    if not rng.weird(0.3):
        return [GOLD] if rng.random() < 0.7 else [GOLD, "Cameron", ""]
    return rng.choice(([], "James Cameron", [1], [None], None, ["\ud800"], ["x" * 5000], 10**400))


def _number(rng: _Rng, low: float, high: float) -> Any:
    return _weird(rng) if rng.weird() else rng.uniform(low, high)


def _params(rng: _Rng, method: str) -> Any:
    if rng.weird(0.1):
        return rng.choice(([], "x", 1, {"unknown": 1}, {10**400: 1}, {10**5000: 1}, {"x" * 5000: 1}))
    params: dict[Any, Any] = {}
    for name in METHODS[method].params:
        if rng.random() < 0.5:
            continue
        if name in ("step", "total_steps"):
            params[name] = _weird(rng) if rng.weird() else rng.randrange(0, 2000)
        elif name in ("reward", "process", "variant"):
            options = {"reward": ("format", "outcome"), "process": ("both", "over_only", "under_only")}
            params[name] = _weird(rng) if rng.weird() else rng.choice(options.get(name, ("main", "alg3")))
        else:
            params[name] = _number(rng, 0.0, 1.0)
    if rng.weird(0.1):
        params[rng.choice(("lambda_x", "", "step "))] = 1
    return params


def _evaluation(rng: _Rng) -> Any:
    if rng.weird(0.1):
        return _weird(rng)
    evaluation: dict[str, Any] = {
        "planner_score": rng.choice((0.2, 0.6, 1.0, 1.2)),
        "model_plan_steps": rng.randrange(0, 4),
        "effective_steps_self": rng.randrange(0, 3),
        "effective_steps_ref": rng.randrange(0, 3),
        "outcome_accuracy_score": rng.random(),
        "outcome_reasoning_score": rng.random(),
    }
    for _ in range(rng.randrange(0, 3) if rng.weird() else 0):
        key = rng.choice((*evaluation, "extra"))
        if rng.random() < 0.2:
            evaluation.pop(key, None)
        else:
            evaluation[key] = _weird(rng)
    return evaluation


def _judgements(rng: _Rng, method: str) -> Any:
    if rng.weird(0.1):
        return rng.choice(([], "x", 1, {"unknown": 1}, {None: 1}))
    judged: dict[str, Any] = {}
    if method == "hiprag" and rng.random() < 0.9:
        judged["step_flags"] = (
            _weird(rng)
            if rng.weird(0.2)
            else [
                rng.choice(VERDICTS) if rng.weird() else rng.random() < 0.6
                for _ in range(rng.randrange(0, 5))
            ]
        )
    elif method == "autosearch" and rng.random() < 0.9:
        judged["intermediate_answers"] = (
            _weird(rng)
            if rng.weird(0.2)
            else [rng.choice((GOLD, None, "x", 1, "")) for _ in range(rng.randrange(0, 3))]
        )
    elif method == "search_p1":
        if rng.random() < 0.9:
            judged["n_ref_steps"] = _weird(rng) if rng.weird() else rng.randrange(0, 4)
        if rng.random() < 0.9:
            judged["evaluation"] = _evaluation(rng)
    elif method == "tiresrag":
        if rng.random() < 0.9:
            judged["sufficiency"] = rng.choice(VERDICTS + WEIRD) if rng.weird() else rng.random() < 0.5
        if rng.random() < 0.9:
            judged["thinking"] = rng.choice(VERDICTS) if rng.weird(0.3) else _number(rng, 0.0, 1.0)
    if rng.weird(0.1):
        judged["unknown"] = 1
    return judged


def _finite(scored: Scored) -> bool:
    reward = scored.reward
    values = [reward.total, *reward.components.values(), *reward.step_rewards]
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict = 3, 60, 60, 6, 6


def _safe(value: object) -> str:
    """A short repr of an input, even of a 5,000-digit int or a list nested 2,000 deep."""
    try:
        return _REPR.repr(value)
    except (ValueError, RecursionError):
        return f"<{type(value).__name__}>"


@dataclass
class Report:
    inputs: int = 0
    scored: int = 0
    typed_errors: int = 0
    unexpected: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def crashes(self) -> int:
        return sum(self.unexpected.values())

    def record(self, outcome: object, describe: Callable[[], str]) -> None:
        """Count one input's outcome; ``describe`` (called only for the first of each unexpected kind) says what
        the input was."""
        self.inputs += 1
        if isinstance(outcome, Scored):
            if _finite(outcome):
                self.scored += 1
                return
            kind = "non-finite reward"
        elif isinstance(outcome, ALLOWED):
            self.typed_errors += 1
            return
        else:
            kind = type(outcome).__name__
        self.unexpected[kind] += 1
        self.examples.setdefault(kind, f"{describe()} -> {_safe(outcome)}"[:400])


def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return function(*args, **kwargs)
    except Exception as exc:  # the point is to see every kind
        return exc


def _one_batch(rng: _Rng, report: Report, method: str, size: int) -> None:
    """A few items through ``score_batch`` with shared params (HiPRAG's batch average included)."""
    base = SAMPLES[method]
    golds = _golds(rng)
    params = _params(rng, method)
    items = [
        BatchItem(_mutate_text(rng, rng.choice(base)), golds, _judgements(rng, method)) for _ in range(size)
    ]
    outcome = _call(score_batch, method, items, params=params)
    results = outcome if isinstance(outcome, list) and len(outcome) == size else [outcome] * size
    for item, result in zip(items, results, strict=True):
        report.record(result, partial(_describe_batch, method, item, params))


def _describe_batch(method: str, item: BatchItem, params: Any) -> str:
    return f"score_batch({method!r}, [{_safe(item)}, …], params={_safe(params)})"


def _one(rng: _Rng, report: Report, methods: list[str]) -> None:
    method: Any = rng.choice(methods) if rng.random() < 0.99 else rng.choice(("nope", "", None, 10**400))
    base = SAMPLES.get(method, SAMPLES["search_r1"]) if isinstance(method, str) else SAMPLES["search_r1"]
    text: Any = _weird(rng) if rng.weird(0.02) else _mutate_text(rng, rng.choice(base))
    golds = _golds(rng)
    params = _params(rng, method) if method in METHODS else {}
    judged = _judgements(rng, method) if method in METHODS else None
    outcome = _call(score, method, text, golds, params=params, judgements=judged)
    report.record(
        outcome,
        lambda: (
            f"score({_safe(method)}, {_safe(text)}, {_safe(golds)}, params={_safe(params)}, "
            f"judgements={_safe(judged)})"
        ),
    )


def fuzz(n: int, seed: int = 0) -> Report:
    """Run ``n`` fuzzed inputs through ``score`` (and ``score_batch``); deterministic for a seed."""
    rng = _Rng(seed)
    methods = sorted(METHODS)
    report = Report()
    started = time.perf_counter()
    while report.inputs < n:
        rng.weird_share = rng.choice((0.0, 0.05, 0.3, 1.0))
        if rng.random() < 0.05:
            _one_batch(rng, report, rng.choice(methods), min(rng.randrange(2, 6), n - report.inputs))
        else:
            _one(rng, report, methods)
    report.seconds = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-n", "--inputs", type=int, default=100_000, help="inputs to score (default 100,000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    report = fuzz(args.inputs, args.seed)
    print(f"inputs:                 {report.inputs:,}")
    print(f"scored (finite reward): {report.scored:,}")
    print(
        f"typed errors:           {report.typed_errors:,} (ScoringInputError, BatchAverageRequired, MissingVerdict)"
    )
    print(f"other outcomes:         {report.crashes:,} (target 0)")
    for kind, count in report.unexpected.most_common():
        print(f"  {kind}: {count:,}, e.g. {report.examples[kind]}")
    print(
        f"time:                   {report.seconds:.1f} s ({report.inputs / max(report.seconds, 1e-9):,.0f} inputs/s)"
    )
    return 1 if report.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
