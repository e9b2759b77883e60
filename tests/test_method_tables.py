"""Every table keyed by reward method covers scoring.scorer.METHODS, so a new method cannot be half-added.

A table that holds every method must hold exactly METHODS' names. A table that holds some of them (a property only
some methods have) is listed with the methods it leaves out and why. What only the scorer needs to know of a method
(its chat support, the judge outcomes a bench simulates) is a field of its METHODS entry; what a format needs (its
parser and synthetic writer) is its scoring.formats.FORMATS entry. docs/architecture.md ("Adding a reward method")
lists the files.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Collection
from dataclasses import fields
from typing import Any

import pytest

import trainer.scripted  # noqa: F401  (imports torch: once, while collecting, not inside a test's time)
from scoring.formats import parse
from scoring.params import param_help, param_specs
from scoring.scorer import METHODS

# Tables with one entry per method: "module:attribute".
EVERY_METHOD = [
    "scoring.formats:FORMATS",  # a method's trajectory format: its own parser and synthetic writer
    "agent.rollout:PAPER_CONFIGS",
    "agent.rollout_methods:METHODS",
    "trainer.demonstration_turns:TURNS",
    "trainer.scripted:SCRIPTS",
    "trainer.verl_judging:JUDGE_WORK",  # veRL's judge outcomes per method
    "trainer.config:METHODS",
    "webapp.common.methods:LABELS",
    "webapp.common.methods:METHOD_NAMES",
]

# Tables with the methods that have some property, and the methods they leave out (with why).
SOME_METHODS = [
    # Search-R1's reward reads no judge outcome (scoring.scorer.METHODS["search_r1"].judgements is empty).
    ("agent.method_judging:JUDGEMENTS", {"search_r1"}),
    # AutoSearch's intermediate answers are the policy's own, Search-R1 reads no judge outcome: no LLM judge work.
    ("agent.method_judging:LLM_JUDGE_WORK", {"search_r1", "autosearch"}),
    # Only Search-P1's judge needs a reference plan per question (Algorithm 1).
    ("agent.method_judging:REFERENCE_PLAN_METHODS", {"search_r1", "hiprag", "autosearch", "tiresrag"}),
    # The released reward code (verl_reward's reference mode) exists for Search-R1 and HiPRAG only.
    ("trainer.verl_reward:REFERENCE_SCORERS", {"autosearch", "search_p1", "tiresrag"}),
    # Only HiPRAG's Sec. 5.3 ablations give a trajectory the batch's average bonus (veRL's batch_bonus modes).
    ("trainer.verl_reward:BATCH_AVERAGE", {"search_r1", "autosearch", "search_p1", "tiresrag"}),
    # The evidence judge implements HiPRAG's detectors (Search-R1's over-search too); AutoSearch needs no judge.
    ("webapp.common.methods:EVIDENCE_JUDGE_METHODS", {"autosearch", "search_p1", "tiresrag"}),
    # Search-P1's path evaluation and TIRESRAG's sufficiency and thinking judges need an LLM.
    ("webapp.common.methods:LLM_JUDGE_METHODS", {"search_r1", "hiprag", "autosearch"}),
]


def _keys(path: str) -> set[str]:
    module, name = path.split(":")
    table: Any = getattr(importlib.import_module(module), name)
    keys = set(table)
    assert len(keys) == len(table), f"{path} names a method twice"
    return keys


def _mismatches(methods: Collection[str]) -> list[str]:
    """Each table that does not hold what ``methods`` asks of it, with the names it lacks or has too many."""
    expected = [(path, set(methods)) for path in EVERY_METHOD]
    expected += [(path, set(methods) - left_out) for path, left_out in SOME_METHODS]
    found = []
    for path, names in expected:
        keys = _keys(path)
        if keys != names:
            found.append(f"{path}: lacks {sorted(names - keys)}, has too many {sorted(keys - names)}")
    return found


@pytest.mark.parametrize("path", EVERY_METHOD)
def test_a_table_of_every_method_holds_exactly_the_scorers_methods(path: str) -> None:
    assert _keys(path) == set(METHODS), path


@pytest.mark.parametrize(("path", "left_out"), SOME_METHODS)
def test_a_table_of_some_methods_leaves_out_only_the_named_ones(path: str, left_out: set[str]) -> None:
    assert _keys(path) == set(METHODS) - left_out, path


def test_a_method_added_to_the_scorer_alone_is_caught_by_every_table() -> None:
    assert _mismatches(METHODS) == []
    half_added = [*METHODS, "new_method"]
    found = _mismatches(half_added)
    assert len(found) == len(EVERY_METHOD) + len(SOME_METHODS)
    assert all("lacks ['new_method']" in line for line in found), found


def test_judgement_builders_are_the_methods_whose_reward_reads_judge_outcomes() -> None:
    assert _keys("agent.method_judging:JUDGEMENTS") == {m for m, spec in METHODS.items() if spec.judgements}


@pytest.mark.parametrize("method", list(METHODS))
def test_each_method_says_whether_chat_trajectories_are_scored_and_if_not_why(method: str) -> None:
    from scoring.chat_scoring import NOT_APPLICABLE

    refusal = METHODS[method].chat_refusal
    assert refusal is None or len(refusal) > 40, method  # a refusal explains itself
    assert (method in NOT_APPLICABLE) == (refusal is not None)


@pytest.mark.parametrize("method", list(METHODS))
def test_each_methods_simulated_judgements_are_ones_its_scorer_accepts(method: str) -> None:
    from scoring.scorer import score
    from scoring.synthetic import generate

    spec = METHODS[method]
    for item in generate(spec.format, 20, seed=5, malformed_rate=0.3):
        trajectory = parse(spec.format, item.text)
        judgements = spec.simulated_judgements(trajectory, item.golds, [True, False] * 4)
        assert set(judgements) <= set(spec.judgements), method
        assert math.isfinite(score(method, item.text, item.golds, judgements=judgements).reward.total)


def test_the_web_apps_method_choices_are_the_scorers_methods() -> None:
    from webapp.runs.models import Method

    assert list(Method.values) == list(METHODS)


def test_each_method_names_its_own_format() -> None:
    assert all(spec.format == name for name, spec in METHODS.items())


@pytest.mark.parametrize("method", list(METHODS))
def test_each_method_declares_its_weights_with_a_default_a_range_and_help(method: str) -> None:
    spec = METHODS[method]
    assert spec.params == tuple(f.name for f in fields(spec.params_type))
    for name, (default, declared) in param_specs(spec.params_type).items():
        assert declared.help and param_help(spec.params_type, name).startswith(declared.help), (method, name)
        if declared.kind == "choice":
            assert default in declared.choices, (method, name)
        elif default is not None:
            assert declared.low <= default <= declared.high, (method, name)
    assert spec.read_params(None) == spec.params_type()  # every weight has its default
