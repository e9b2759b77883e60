"""Search-R1: the parser, the format check, the prompt and the rewards (paper mode and reference variants)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scoring.formats import parse
from scoring.formats.searchr1 import (
    ASSISTANT_MARKER,
    extract_solution_reference,
    is_valid_sequence_reference,
    make_prefix,
    parse_searchr1,
    prepare_question,
)
from scoring.metrics import substring_match
from scoring.rewards.searchr1 import (
    retrieval_hit,
    retrieval_hit_reference,
    searchr1_em_reward_reference,
    searchr1_format_reward,
    searchr1_format_reward_reference,
    searchr1_outcome_reward,
    searchr1_subem_reward_reference,
)
from scoring.trajectory import StepKind

PROMPT = make_prefix("What is the capital of France?")
CHAT = (
    "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
    f"<|im_start|>user\n{PROMPT}<|im_end|>\n<|im_start|>assistant\n"
)
DOCS_PARIS = 'Doc 1(Title: "Paris") Paris is the capital of France.\n'
DOCS_LYON = 'Doc 1(Title: "Lyon") Lyon is a city.\n'
ONE_SEARCH = f"<think> need to search </think>\n<search> capital of France </search>\n\n<information>{DOCS_PARIS}</information>\n\n<think> found it </think>\n<answer>Paris</answer>"


def test_it_builds_the_search_r1_prompt() -> None:
    assert PROMPT.startswith(
        "Answer the given question. You must conduct reasoning inside <think> and </think>"
    )
    assert PROMPT.endswith(
        "For example, <answer> Beijing </answer>. Question: What is the capital of France?\n"
    )
    assert prepare_question("  who wrote Hamlet ") == "who wrote Hamlet?"
    with pytest.raises(NotImplementedError):
        make_prefix("q", template_type="instruct")


@pytest.mark.parametrize(
    ("response", "n_search", "n_non_search", "answers"),
    [
        # answers from memory: one non-search step
        pytest.param(
            "<think> I know this. </think>\n<answer> Paris </answer>", 0, 1, ("Paris",), id="no-search"
        ),
        pytest.param(ONE_SEARCH, 1, 1, ("Paris",), id="one-search"),
        pytest.param(
            f"<think>a</think><search>q1</search><information>{DOCS_LYON}</information>"
            f"<think>b</think><search>q2</search><information>{DOCS_PARIS}</information>"
            "<think>c</think><answer>paris.</answer>",
            2,
            1,
            ("paris.",),
            id="two-searches",
        ),
        # whitespace around and between tags is allowed
        pytest.param("\n <think>a</think> \n\n <answer>Paris</answer> \n", 0, 1, ("Paris",), id="whitespace"),
        # an empty answer is still an answer
        pytest.param("<think>a</think><answer></answer>", 0, 1, ("",), id="empty-answer"),
    ],
)
def test_it_parses_valid_responses(
    response: str, n_search: int, n_non_search: int, answers: tuple[str, ...]
) -> None:
    for text in (response, CHAT + response, PROMPT + response):  # bare, chat template, base-model prompt
        trajectory = parse_searchr1(text)
        assert trajectory.valid, trajectory.error
        assert trajectory.format == "search_r1"
        assert (len(trajectory.search_steps), len(trajectory.non_search_steps)) == (n_search, n_non_search)
        assert trajectory.answers == answers
        for step in trajectory.steps:
            assert text[step.start : step.start + len(step.raw)] == step.raw


def test_it_fills_the_steps_of_a_search_turn() -> None:
    trajectory = parse_searchr1(CHAT + ONE_SEARCH)
    search, final = trajectory.steps
    assert (search.kind, search.reasoning, search.query) == (
        StepKind.SEARCH,
        "need to search",
        "capital of France",
    )
    assert search.context == DOCS_PARIS.strip()
    assert search.raw.startswith("<think>") and search.raw.endswith("</information>")
    assert (final.kind, final.reasoning, final.query, final.context) == (
        StepKind.NON_SEARCH,
        "found it",
        None,
        None,
    )
    assert final.raw.endswith("<answer>Paris</answer>")
    assert trajectory.extras == {"question": "What is the capital of France?"}
    assert parse("search_r1", ONE_SEARCH) == parse_searchr1(ONE_SEARCH)


@pytest.mark.parametrize(
    ("response", "reason", "at"),
    [
        # prose before the first tag
        pytest.param("Let me think. <think>ok</think><answer>Paris</answer>", "text outside tags", "Let"),
        # anything after </answer>, even an end-of-turn token, breaks the format (as in the reference)
        pytest.param(
            "<think>ok</think><answer>Paris</answer> Hope this helps!", "text after </answer>", "Hope"
        ),
        pytest.param(
            "<think>a</think><answer>Paris</answer><|im_end|>", "text after </answer>", "<|im_end|>"
        ),
        # truncated generation: the error sits at the end of the text
        pytest.param("<think>I am still thinking about", "response ends inside <think>", ""),
        # a second answer after the first one
        pytest.param(
            "<think>ok</think><answer>Rome</answer><think>wait</think><answer>Paris</answer>",
            "unexpected <think> after </answer>",
            "<think>wait",
        ),
        pytest.param(
            "<think>a</think><think>b</think><answer>Paris</answer>",
            "unexpected <think> after </think>",
            "<think>b",
        ),
        pytest.param(
            "<search>q</search><think>b</think><answer>Paris</answer>",
            "unexpected <search> at the start",
            "<search>",
        ),
        # after </information> the agent must think before answering
        pytest.param(
            f"<think>a</think><search>q</search><information>{DOCS_PARIS}</information><answer>Paris</answer>",
            "unexpected <answer> after </information>",
            "<answer>",
        ),
        pytest.param(
            "<think>maybe <answer>Paris</answer></think><answer>Paris</answer>",
            "unexpected <answer> inside <think>",
            "<answer>Paris</answer></think>",
        ),
        # information that no search asked for
        pytest.param(
            f"<think>a</think><information>{DOCS_PARIS}</information><think>b</think><answer>Paris</answer>",
            "unexpected <information> after </think>",
            "<information>",
        ),
        # tags are case-sensitive
        pytest.param("<Think>a</Think><Answer>Paris</Answer>", "text outside tags", "<Think>"),
        pytest.param("", "response ends at the start of the response", ""),
    ],
)
def test_it_reports_where_a_response_breaks_the_format(response: str, reason: str, at: str) -> None:
    text = CHAT + response
    trajectory = parse_searchr1(text)
    assert trajectory.error is not None
    assert reason in trajectory.error.reason
    expected = len(text) if at == "" else len(CHAT) + response.index(at)
    assert trajectory.error.position == expected
    assert trajectory.valid is is_valid_sequence_reference(text)[0] is False


def test_it_recovers_steps_and_answers_from_a_broken_response() -> None:
    text = "<think>ok</think><answer>Rome</answer><think>wait</think><search>q</search><answer>Paris</answer> bye"
    trajectory = parse_searchr1(text)
    assert not trajectory.valid
    assert trajectory.answers == ("Rome", "Paris")
    assert [s.kind for s in trajectory.steps] == [StepKind.NON_SEARCH, StepKind.SEARCH]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(CHAT + ONE_SEARCH, (True, "Valid sequence format"), id="valid"),
        # the reference needs the Qwen chat marker: base-model prompts are never valid
        pytest.param(PROMPT + ONE_SEARCH, (False, "Missing assistant marker"), id="no-marker"),
        # tag counts are checked before the sequence
        pytest.param(
            CHAT + "<think>I am still thinking about",
            (False, "Mismatch in think tags: 1 opening vs 0 closing tags"),
            id="count",
        ),
        pytest.param(
            CHAT + "Let me think. <think>ok</think><answer>Paris</answer>",
            (False, "Unexpected content 'Let me think.' between tags (state: start)"),
            id="content",
        ),
        pytest.param(
            CHAT + "<think>a</think><answer>Paris</answer><|im_end|>",
            (False, "Unexpected content in state end"),
            id="after-end",
        ),
        pytest.param(
            CHAT + "<think>a</think><think>b</think><answer>Paris</answer>",
            (False, "Unexpected tag <think> in state after_think"),
            id="tag",
        ),
        pytest.param(
            CHAT + "<think>a</think><search>q</search><information>x</information>",
            (False, "Incomplete sequence, ended in state information"),
            id="incomplete",
        ),
    ],
)
def test_it_reproduces_the_reference_format_check(text: str, expected: tuple[bool, str]) -> None:
    assert is_valid_sequence_reference(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(CHAT + ONE_SEARCH, "Paris", id="last-span"),
        # no answer in the response: the prompt's example answer is "extracted" (REFERENCE.md discrepancy 5)
        pytest.param(CHAT + "<think>I am still thinking about", "Beijing", id="beijing"),
        # a bare response with one answer has fewer than two spans: no answer at all
        pytest.param("<think>a</think><answer> Paris </answer>", None, id="one-span"),
        pytest.param("<answer>Rome</answer><answer> Paris </answer>", "Paris", id="two-spans"),
    ],
)
def test_it_reproduces_the_reference_answer_extraction(text: str, expected: str | None) -> None:
    assert extract_solution_reference(text) == expected


@pytest.mark.parametrize(
    ("response", "golds", "outcome"),
    [
        pytest.param(ONE_SEARCH, ["Paris"], 1.0, id="right"),
        pytest.param("<think>a</think><answer>The Paris!</answer>", ["Paris"], 1.0, id="normalized"),
        pytest.param(
            "<think>a</think><answer>Paris, France</answer>", ["Paris"], 0.0, id="superset-is-not-em"
        ),
        # the paper's reward ignores the format: a right answer after prose still scores 1
        pytest.param("Sure. <think>a</think><answer>Paris</answer>", ["Paris"], 1.0, id="invalid-format"),
        # no answer is 0 (no "Beijing" fallback in paper mode)
        pytest.param("<think>I am still thinking", ["Beijing"], 0.0, id="no-answer"),
    ],
)
def test_it_rewards_the_outcome_like_the_paper(response: str, golds: list[str], outcome: float) -> None:
    reward = searchr1_outcome_reward(parse_searchr1(CHAT + response), golds)
    assert reward.total == outcome
    assert reward.components == {"outcome": outcome}


@pytest.mark.parametrize(
    ("response", "rs", "total", "components"),
    [
        pytest.param(ONE_SEARCH, 0.1, 1.0, (1.0, 1.0, 1.0), id="valid-right"),
        # valid but wrong: the structure score, plus the retrieval score when a passage held a gold
        pytest.param(
            ONE_SEARCH.replace(">Paris</answer>", ">Lyon</answer>"), 0.1, 0.2 + 0.1, (0, 1, 1), id="hit"
        ),
        pytest.param(
            ONE_SEARCH.replace(">Paris</answer>", ">Lyon</answer>"), 0.0, 0.2, (0, 1, 1), id="hit-rs-0"
        ),
        pytest.param(
            f"<think>x</think><search>q</search><information>{DOCS_LYON}</information><think>y</think><answer>Lyon</answer>",
            0.1,
            0.2,
            (0, 1, 0),
            id="no-hit",
        ),
        # invalid but right: 1 - sfs; invalid and wrong: the final-format score
        pytest.param("<answer>Paris</answer>", 0.0, 0.8, (1, 0, 0), id="invalid-right"),
        pytest.param(
            "Let me think. <think>ok</think><answer>Rome</answer>", 0.0, 0.1, (0, 0, 0), id="invalid-wrong"
        ),
        # invalid with no answer: 0
        pytest.param("<think>I am still thinking about", 0.1, 0.0, (0, 0, 0), id="invalid-no-answer"),
    ],
)
def test_it_rewards_outcome_and_format_like_v03(
    response: str, rs: float, total: float, components: tuple[float, float, float]
) -> None:
    reward = searchr1_format_reward(parse_searchr1(CHAT + response), ["Paris"], retrieval_score=rs)
    assert reward.total == total
    assert (
        reward.components["outcome"],
        reward.components["format"],
        reward.components["retrieval"],
    ) == components


def test_it_refuses_scores_that_leave_the_unit_interval() -> None:
    trajectory = parse_searchr1(ONE_SEARCH)
    with pytest.raises(ValueError):
        searchr1_format_reward(trajectory, ["Paris"], structure_format_score=0.95, retrieval_score=0.1)
    with pytest.raises(ValueError):
        searchr1_format_reward(trajectory, ["Paris"], final_format_score=-0.1)


@pytest.mark.parametrize(
    ("text", "golds", "em", "subem", "fmt"),
    [
        pytest.param(CHAT + ONE_SEARCH, ["Paris"], 1.0, 1.0, 1.0, id="valid-right"),
        # "Beijing" from the prompt is the answer of a response without one
        pytest.param(
            CHAT + "<think>I am still thinking about", ["Beijing"], 1.0, 1.0, 0.8, id="beijing-right"
        ),
        pytest.param(CHAT + "<think>I am still thinking about", ["Paris"], 0.0, 0.0, 0.1, id="beijing-wrong"),
        # without the prompt's two spans a single answer is no answer: valid → sfs only
        pytest.param(
            ASSISTANT_MARKER + "\n<think>ok</think>\n<answer> Paris </answer>",
            ["Paris"],
            0.0,
            0.0,
            0.2,
            id="one-span",
        ),
        # the reference's format check needs the chat marker
        pytest.param(PROMPT + ONE_SEARCH, ["Paris"], 1.0, 1.0, 0.8, id="no-marker"),
        pytest.param(
            CHAT + "<think>a</think><answer>Paris, France</answer>", ["Paris"], 0.0, 1.0, 0.2, id="subem"
        ),
    ],
)
def test_it_reproduces_the_reference_rewards(
    text: str, golds: list[str], em: float, subem: float, fmt: float
) -> None:
    assert searchr1_em_reward_reference(text, golds) == em
    assert searchr1_subem_reward_reference(text, golds) == subem
    assert (
        searchr1_format_reward_reference(text, golds, structure_format_score=0.2, final_format_score=0.1)
        == fmt
    )


def test_it_adds_the_retrieval_score_in_the_reference_order() -> None:
    wrong = CHAT + ONE_SEARCH.replace(">Paris</answer>", ">Lyon</answer>")
    reward = searchr1_format_reward_reference(
        wrong, ["Paris"], structure_format_score=0.2, final_format_score=0.1, retrieval_score=0.1
    )
    assert reward == 0.30000000000000004  # 0.2 + 0.1, bit for bit


def test_it_finds_golds_in_retrieved_passages_only() -> None:
    assert retrieval_hit(parse_searchr1(ONE_SEARCH), ["paris"])
    # the gold is in the answer, not in any passage
    assert not retrieval_hit(parse_searchr1(ONE_SEARCH.replace(DOCS_PARIS, DOCS_LYON)), ["Paris"])
    # normalization applies to passages too: "Paris," covers "paris" and an empty gold covers any passage
    assert retrieval_hit(parse_searchr1(ONE_SEARCH.replace(DOCS_PARIS, DOCS_LYON)), [""])


_TAGS = [
    "<think>",
    "</think>",
    "<search>",
    "</search>",
    "<information>",
    "</information>",
    "<answer>",
    "</answer>",
]
_PIECES = st.lists(
    st.sampled_from([*_TAGS, " ", "\n", "x", "Paris", "<|im_end|>"]) | st.text(max_size=5), max_size=16
)


@given(_PIECES)
def test_it_never_raises_and_agrees_with_the_reference_on_validity(pieces: list[str]) -> None:
    response = "".join(pieces)
    text = CHAT + response
    trajectory = parse_searchr1(text)
    assert trajectory.valid is is_valid_sequence_reference(text)[0]
    if trajectory.error is not None:
        assert len(CHAT) <= trajectory.error.position <= len(text)
    for step in trajectory.steps:
        assert text[step.start : step.start + len(step.raw)] == step.raw
    assert parse_searchr1(response).valid is trajectory.valid  # the marker is optional in paper mode


@given(st.text(max_size=200))
def test_it_never_raises_on_any_string(text: str) -> None:
    trajectory = parse_searchr1(text)
    assert trajectory.text == text
    assert trajectory.valid is (trajectory.error is None)


@given(
    _PIECES,
    st.lists(st.text(max_size=8), min_size=1, max_size=3),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_it_keeps_the_format_reward_in_the_unit_interval(
    pieces: list[str], golds: list[str], sfs: float, ffs: float, rs: float
) -> None:
    assume(sfs + rs <= 1.0)  # the documented precondition of the [0, 1] range
    reward = searchr1_format_reward(
        parse_searchr1("".join(pieces)),
        golds,
        structure_format_score=sfs,
        final_format_score=ffs,
        retrieval_score=rs,
    )
    assert 0.0 <= reward.total <= 1.0
    assert searchr1_outcome_reward(parse_searchr1("".join(pieces)), golds).total in (0.0, 1.0)


@given(
    st.text(alphabet=st.sampled_from(list("aParis the.,-x É")), max_size=30),
    st.lists(st.text(alphabet=st.sampled_from(list("aParis the.,-x")), max_size=8), min_size=1, max_size=3),
)
def test_it_keeps_the_retrieval_shortcut_equal_to_sub_em(passage: str, golds: list[str]) -> None:
    # retrieval_hit skips normalizing passages that cannot hold a gold; it must agree with plain Sub-EM
    text = f"<information>{passage}</information>"
    assert retrieval_hit_reference(text, golds) is substring_match(passage.strip(), golds)
