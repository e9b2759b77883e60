"""HiPRAG's judge prompts and messages, and judge replies turned into verdicts (paper) or flags (released code)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.formats.hiprag import parse_hiprag
from scoring.judging.hiprag import (
    NON_SEARCH_STEP_VERIFY_PROMPT_V1,
    SEARCH_STEP_VERIFY_PROMPT_V1,
    batch_regeneration_queries,
    initial_prompt,
    over_search_flag_reference,
    over_search_message,
    over_search_message_reference,
    over_search_verdict,
    parse_correctness_verdict,
    parse_equivalence_verdict,
    regeneration_prompt,
    regeneration_queries,
    under_search_flag_reference,
    under_search_message,
    under_search_verdict,
)
from scoring.verdicts import Verdict
from tests.scoring.test_hiprag_format import FIG3

T, F, U = Verdict.TRUE, Verdict.FALSE, Verdict.UNPARSEABLE


@pytest.mark.parametrize(
    ("reply", "paper", "over_ref", "under_ref"),
    [
        pytest.param("<answer>True</answer>", T, True, False, id="true"),
        pytest.param("<answer>False</answer>", F, False, True, id="false"),
        # case and whitespace do not matter to the paper; the released test is a case-sensitive substring
        pytest.param("<answer> true </answer>", T, False, True, id="lowercase"),
        pytest.param("<answer>TRUE</answer>", T, False, True, id="uppercase"),
        # "Not True" is not true — but contains "True" for the released code
        pytest.param("<answer>Not True</answer>", U, True, False, id="not-true"),
        # the LAST answer counts
        pytest.param("<answer>True</answer> wait <answer>False</answer>", F, False, True, id="last-answer"),
        # no tag: unparseable; the released code's IndexError means "not flagged" for both detectors
        pytest.param("True", U, False, False, id="no-tag"),
        pytest.param("", U, False, False, id="empty-reply"),
        # an empty answer: unparseable; released: no "True" → under-searched
        pytest.param("<answer></answer>", U, False, True, id="empty-answer"),
        pytest.param("<answer>Maybe</answer>", U, False, True, id="other-word"),
    ],
)
def test_it_parses_judge_replies(reply: str, paper: Verdict, over_ref: bool, under_ref: bool) -> None:
    assert parse_equivalence_verdict(reply) is paper
    assert parse_correctness_verdict(reply) is paper
    assert over_search_flag_reference(reply) is over_ref
    assert under_search_flag_reference(reply) is under_ref


@pytest.mark.parametrize(
    ("reply", "over", "under"),
    [
        # equivalent conclusion → the search was redundant; correct step → no under-search
        pytest.param("<answer>True</answer>", T, F, id="true"),
        pytest.param("<answer>False</answer>", F, T, id="false"),
        # unusable stays unusable in both directions
        pytest.param("no verdict", U, U, id="unparseable"),
    ],
)
def test_it_orients_verdicts_as_detector_flags(reply: str, over: Verdict, under: Verdict) -> None:
    assert over_search_verdict(reply) is over
    assert under_search_verdict(reply) is under


def test_an_api_error_is_not_a_flag_in_the_released_code() -> None:
    assert over_search_flag_reference(None) is False
    assert under_search_flag_reference(None) is False


@given(st.text())
def test_verdict_parsing_never_raises(reply: str) -> None:
    assert parse_equivalence_verdict(reply) in (T, F, U)
    assert isinstance(over_search_flag_reference(reply), bool)


def test_it_builds_the_judge_messages_from_fig_3() -> None:
    steps = parse_hiprag(FIG3).steps
    conclusion = steps[2].conclusion or ""
    assert over_search_message(conclusion, "Lisa Su is AMD's CEO.") == (
        SEARCH_STEP_VERIFY_PROMPT_V1 + "\n\nStatement 1: Dr. Lisa Su\n\nStatement 2: Lisa Su is AMD's CEO."
    )
    assert under_search_message(steps[1].raw).startswith(
        NON_SEARCH_STEP_VERIFY_PROMPT_V1 + "\n\nStep Content: \n"
    )
    assert regeneration_prompt(steps[0].query or "") == (
        "Please answer the following question or provide relevant information to the statement: "
        "latest playstation console model"
    )


@pytest.mark.parametrize(
    ("step", "regenerated", "expected"),
    [
        # query and conclusion are the last spans, unstripped; the query is looked up verbatim
        pytest.param("<search> q </search><conclusion> o </conclusion>", {" q ": "a"}, "\n\nStatement 1:  o \n\nStatement 2: a", id="unstripped"),
        # a query that was not regenerated: no judge call (and no over-search)
        pytest.param("<search>q</search><conclusion>o</conclusion>", {"other": "a"}, None, id="not-regenerated"),
        # no conclusion: the released code's IndexError, no call
        pytest.param("<search>q</search>", {"q": "a"}, None, id="no-conclusion"),
    ],
)  # fmt: skip
def test_it_builds_the_released_over_search_message(
    step: str, regenerated: dict[str, str], expected: str | None
) -> None:
    message = over_search_message_reference(step, regenerated)
    assert message == (None if expected is None else SEARCH_STEP_VERIFY_PROMPT_V1 + expected)


def test_the_regenerated_queries_include_the_prompts_example() -> None:
    response = FIG3[len("<think>\n") :]
    sample = initial_prompt("Who runs AMD?") + response
    assert regeneration_queries(sample) == [
        "AMD stock price closing July 18 2025",
        "The precise search query you will use.",  # the last <think>…</think> span starts inside the prompt
        "current CEO of AMD",
        "latest playstation console model",
    ]
    assert batch_regeneration_queries([sample, sample]) == regeneration_queries(sample)
    assert regeneration_queries("no think here") == []


def test_the_initial_prompt_appends_a_question_mark_once() -> None:
    assert initial_prompt("  Who runs AMD  ").endswith(
        "User Question: Who runs AMD?<|im_end|>\n<|im_start|>assistant\n\n<think>\n<step>\n    <reasoning>"
    )
    assert "Who runs AMD??" not in initial_prompt("Who runs AMD?")
    with pytest.raises(ValueError, match="empty question"):
        initial_prompt("   ")


def test_the_prompts_match_the_papers_figures_where_they_should() -> None:
    # Fig. 5 is the released string; Fig. 6 only adds bold to the two criteria (the code has none).
    assert "semantically equivalent—that is" in SEARCH_STEP_VERIFY_PROMPT_V1
    assert "1. Factual Accuracy: Is the statement" in NON_SEARCH_STEP_VERIFY_PROMPT_V1
    assert "**" not in NON_SEARCH_STEP_VERIFY_PROMPT_V1
