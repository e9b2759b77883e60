"""Properties every trajectory parser shares, checked across all formats at once."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.formats import PARSERS, parse
from scoring.synthetic import GENERATORS, generate
from scoring.trajectory import StepKind, Trajectory

TAGS = [
    "<think>", "</think>", "<step>", "</step>", "<reasoning>", "</reasoning>", "<search>", "</search>",
    "<context>", "</context>", "<conclusion>", "</conclusion>", "<information>", "</information>",
    "<answer>", "</answer>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
    "<plan>", "</plan>", "<|im_start|>assistant\n", "<|im_end|>", "{", "}", '"', "\n", " ",
]  # fmt: skip
# Text made of the formats' own tags in any order finds far more edge cases than arbitrary unicode alone.
tag_soup = st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=8)), max_size=40).map("".join)


@pytest.mark.parametrize("format_name", sorted(PARSERS))
@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(), tag_soup))
def test_it_never_raises_and_always_locates_errors(format_name: str, text: str) -> None:
    trajectory = parse(format_name, text)
    assert isinstance(trajectory, Trajectory)
    assert trajectory.format == format_name
    assert trajectory.text == text
    if trajectory.error is not None:
        assert trajectory.error.reason
        assert 0 <= trajectory.error.position <= len(text)
    for step in trajectory.steps:
        assert step.kind in (StepKind.SEARCH, StepKind.NON_SEARCH)
        assert (step.query is not None) == (step.kind is StepKind.SEARCH)


@pytest.mark.parametrize("format_name", sorted(GENERATORS))
def test_it_recovers_what_the_generator_built(format_name: str) -> None:
    for item in generate(format_name, 200, seed=7):
        trajectory = parse(format_name, item.text)
        assert trajectory.valid == item.well_formed, (trajectory.error, item.text)
        if item.well_formed:
            assert tuple(step.kind.value for step in trajectory.steps) == item.step_kinds
            assert trajectory.answer == item.answer


def test_it_names_the_known_formats_when_one_is_unknown() -> None:
    with pytest.raises(KeyError, match="known: search_r1, hiprag"):
        parse("search_r2", "")
