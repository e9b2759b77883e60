"""The environment's text: truncation, actions, passages, observations and the /retrieve schema."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.observations import (
    HIPRAG_INVALID_ACTION,
    RETRIEVE_DEFAULT_TOPK,
    SEARCHR1_INVALID_ACTION,
    RetrievalRequest,
    RetrievedDocument,
    execute_predictions,
    flashrag_information_block,
    format_passage,
    hiprag_context_block,
    information_block,
    parse_action,
    parse_retrieval_response,
    passages_to_string,
    retrieval_response,
    retrieval_schema,
    truncate_response,
)

PARIS = '"Paris"\nParis is the capital of France.'
FRANCE = '"France"\nFrance is a country.\nSecond line.'


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        # the model ran on and hallucinated its own observation: cut at </search>
        pytest.param(
            "<think>a</think>\n<search> q </search>\n\n<information>made up</information>",
            "<think>a</think>\n<search> q </search>",
            id="search",
        ),
        pytest.param(
            "<think>a</think><answer> Paris </answer> junk",
            "<think>a</think><answer> Paris </answer>",
            id="answer",
        ),
        # </search> wins over an earlier </answer>
        pytest.param(
            "<think>a</think><answer>x</answer><search>y</search>",
            "<think>a</think><answer>x</answer><search>y</search>",
            id="search-wins",
        ),
        pytest.param("<think>unfinished", "<think>unfinished", id="no-action"),
        pytest.param("<search>q1</search><search>q2</search>", "<search>q1</search>", id="first-search"),
    ],
)
def test_it_truncates_a_turn_after_its_action(response: str, expected: str) -> None:
    assert truncate_response(response) == expected


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        pytest.param(
            "<think>a</think>\n<search> capital of France </search>",
            ("search", "capital of France"),
            id="search",
        ),
        # the first action wins, whichever it is
        pytest.param(
            "<think>a</think><answer>x</answer><search>y</search>", ("answer", "x"), id="first-action"
        ),
        pytest.param("<search>\n multi\nline \n</search>", ("search", "multi\nline"), id="multiline"),
        # an unclosed or mismatched block is no action
        pytest.param("<search>q</answer>", (None, ""), id="mismatched"),
        pytest.param("<think>unfinished", (None, ""), id="none"),
    ],
)
def test_it_parses_the_action(prediction: str, expected: tuple[str | None, str]) -> None:
    assert parse_action(prediction) == expected


def test_it_formats_passages_like_search_r1() -> None:
    assert format_passage(1, PARIS) == 'Doc 1(Title: "Paris") Paris is the capital of France.\n'
    # a passage with no newline is all title, with an empty text after the space
    assert format_passage(3, "NoTitleLine") == "Doc 3(Title: NoTitleLine) \n"
    assert passages_to_string([PARIS, FRANCE]) == (
        'Doc 1(Title: "Paris") Paris is the capital of France.\n'
        'Doc 2(Title: "France") France is a country.\nSecond line.\n'
    )
    assert passages_to_string([]) == ""


def test_it_wraps_passages_in_each_methods_observation() -> None:
    docs = passages_to_string([PARIS])
    # Search-R1 strips the passages inside the tag
    assert (
        information_block(docs)
        == '\n\n<information>Doc 1(Title: "Paris") Paris is the capital of France.</information>\n\n'
    )
    # HiPRAG opens the step's <conclusion> for the model
    assert hiprag_context_block(docs).endswith("</context>\n    <conclusion>")
    # FlashRAG keeps the trailing newline and puts the tags on their own lines
    assert flashrag_information_block([PARIS]) == f"\n\n<information>\n{docs}\n</information>\n\n"


def test_it_executes_a_batch_of_turns() -> None:
    result = execute_predictions(
        ["<search> capital </search>", "<answer> Paris </answer>", "no action", ""],
        [1, 1, 1, 0],
        ["Doc 1(Title: x) y\n"],
    )
    assert result.next_obs == (
        "\n\n<information>Doc 1(Title: x) y</information>\n\n",
        "",
        SEARCHR1_INVALID_ACTION,
        "",
    )
    assert (result.dones, result.valid_action, result.is_search) == ((0, 1, 0, 1), (1, 1, 0, 0), (1, 0, 0, 0))
    hiprag = execute_predictions(["no action"], [True], [], style="hiprag")
    assert hiprag.next_obs == (HIPRAG_INVALID_ACTION,)
    assert "directly give the <conclusion>" in HIPRAG_INVALID_ACTION


@pytest.mark.parametrize(
    ("active", "results", "error"),
    [
        # a search with no result left: the reference's list.pop(0) fails
        pytest.param([1], [], IndexError, id="too-few"),
        # results of an inactive search are never consumed: the reference's final assert fails
        pytest.param([0], ["docs"], AssertionError, id="left-over"),
    ],
)
def test_it_fails_like_the_reference_on_mismatched_results(
    active: list[int], results: list[str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        execute_predictions(["<search>q</search>"], active, results)


def test_it_reads_and_writes_the_retrieve_api() -> None:
    request = RetrievalRequest.from_json(
        {"queries": ["capital of France"], "topk": None, "return_scores": True}
    )
    assert request.effective_topk == RETRIEVE_DEFAULT_TOPK == 3
    assert request.to_json() == {"queries": ["capital of France"], "topk": None, "return_scores": True}
    hits = [[RetrievedDocument("0", PARIS, 0.91)]]
    scored = retrieval_response(hits, return_scores=True)
    assert scored == {"result": [[{"document": {"id": "0", "contents": PARIS}, "score": 0.91}]]}
    bare = retrieval_response(hits, return_scores=False)
    assert bare == {"result": [[{"id": "0", "contents": PARIS}]]}
    assert parse_retrieval_response(scored) == hits
    # without scores the score is unknown, never a made-up 0
    assert math.isnan(parse_retrieval_response(bare)[0][0].score)
    assert retrieval_schema()["result"][0][0]["score"] == "<float>"


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({"topk": 3}, id="no-queries"),
        pytest.param({"queries": "one string"}, id="queries-not-a-list"),
        pytest.param({"queries": ["q"], "topk": 0}, id="topk-zero"),
        # JSON true is not a count
        pytest.param({"queries": ["q"], "topk": True}, id="topk-bool"),
        pytest.param({"queries": ["q"], "return_scores": "yes"}, id="return-scores-string"),
    ],
)
def test_it_rejects_malformed_retrieve_requests(payload: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetrievalRequest.from_json(payload)


@given(st.text(max_size=80))
def test_it_never_raises_on_turn_text(text: str) -> None:
    truncated = truncate_response(text)
    assert text.startswith(truncated)
    action, content = parse_action(truncated)
    assert action in (None, "search", "answer")
    assert content == content.strip()
    if action is None:
        assert content == ""
