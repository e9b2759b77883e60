"""Chat trajectories (OpenAI-style messages with tool calls): parsing into steps, errors naming message and field,
and scoring with the methods whose step semantics apply."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring.chat_scoring import NOT_APPLICABLE, score_chat, score_chat_batch
from scoring.errors import ScoringInputError
from scoring.formats import CHAT_FORMAT, parse
from scoring.formats.chat import MALFORMED_KEY, chat_text, parse_chat, parse_chat_messages
from scoring.scorer import Scored, score
from scoring.trajectory import StepKind
from scoring.verdicts import MissingVerdict


def call(call_id: str | None, name: str, arguments: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        found["id"] = call_id
    return found


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You answer questions; search when you need to."},
        {"role": "user", "content": "Who wrote Hamlet?"},
        {
            "role": "assistant",
            "content": "I should look it up.",
            "tool_calls": [call("c1", "search", json.dumps({"query": "Hamlet author"}))],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "Doc 1 (Title: Hamlet) a tragedy by William Shakespeare",
        },
        {"role": "assistant", "content": "The play is Shakespeare's. <answer>William Shakespeare</answer>"},
    ]


def test_a_search_call_is_a_search_step_with_its_query_and_its_tool_result_as_context() -> None:
    parsed = parse_chat_messages(conversation())
    assert parsed.valid and parsed.format == CHAT_FORMAT
    assert [s.kind for s in parsed.steps] == [StepKind.SEARCH, StepKind.NON_SEARCH]
    search, final = parsed.steps
    assert (search.reasoning, search.query) == ("I should look it up.", "Hamlet author")
    assert search.context == "Doc 1 (Title: Hamlet) a tragedy by William Shakespeare"
    assert (final.reasoning, final.conclusion) == ("The play is Shakespeare's.", "William Shakespeare")
    assert parsed.answer == "William Shakespeare" and parsed.n_searches == 1
    assert parsed.extras["question"] == "Who wrote Hamlet?"
    # positions point at the message in the canonical text, and the text parses back to the same trajectory
    assert parsed.text[search.start :].startswith('{"role": "assistant", "content": "I should look it up."')
    assert parse(CHAT_FORMAT, parsed.text) == parsed == parse_chat(json.dumps({"messages": conversation()}))


def test_parallel_calls_ids_out_of_order_other_tools_and_query_lists() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Two lookups and a sum."}],
            "reasoning_content": "thinking",
            "tool_calls": [
                call("a", "retrieve", {"query_list": ["x one", "x two"]}),
                call("b", "calculator", '{"expression": "1+1"}'),
                call("c", "web_search", '{"query": "y"}'),
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "result y"},
        {"role": "tool", "tool_call_id": "a", "content": "result x"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "assistant", "content": "Plenty of thought, no search here."},
        {"role": "assistant", "content": "  Paris  "},
    ]
    parsed = parse_chat_messages(messages)
    assert parsed.valid, parsed.error
    kinds = [s.kind for s in parsed.steps]
    assert kinds == [
        StepKind.SEARCH,
        StepKind.NON_SEARCH,
        StepKind.SEARCH,
        StepKind.NON_SEARCH,
        StepKind.NON_SEARCH,
    ]
    assert [s.query for s in parsed.steps] == ["x one; x two", None, "y", None, None]
    assert [s.context for s in parsed.steps[:3]] == ["result x", "2", "result y"]
    assert parsed.steps[0].reasoning == "thinking\nTwo lookups and a sum." and parsed.steps[2].reasoning == ""
    assert [s.index for s in parsed.steps] == [0, 1, 2, 3, 4]
    # a final message without <answer> gives its whole text as the answer
    assert parsed.answer == "Paris" and parsed.answers == ("Paris",)
    # the search tools are configurable: with only "search", retrieve and web_search are other tools
    assert parse_chat_messages(messages, search_tools={"search"}).n_searches == 0


def test_results_without_ids_answer_the_calls_in_order() -> None:
    messages = conversation()
    del messages[2]["tool_calls"][0]["id"]
    del messages[3]["tool_call_id"]
    assert parse_chat_messages(messages).steps[0].context == messages[3]["content"]


def test_every_answer_block_is_kept_for_reflection_and_the_last_is_the_answer() -> None:
    messages = conversation()
    messages.insert(2, {"role": "assistant", "content": "Maybe <answer>Marlowe</answer>, let me check."})
    parsed = parse_chat_messages(messages)
    assert parsed.answers == ("Marlowe", "William Shakespeare") and parsed.answer == "William Shakespeare"
    assert parsed.steps[0].kind is StepKind.NON_SEARCH and parsed.steps[0].conclusion == "Marlowe"


def _broken(edit: Any) -> Any:
    messages = conversation()
    edit(messages)
    return parse_chat_messages(messages)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            lambda m: m[2]["tool_calls"][0]["function"].update(arguments="{query: x"),
            "messages[2].tool_calls[0].function.arguments: not JSON",
        ),
        (
            lambda m: m[2]["tool_calls"][0]["function"].update(arguments='["x"]'),
            "messages[2].tool_calls[0].function.arguments: expected a JSON object, got list",
        ),
        (
            lambda m: m[2]["tool_calls"][0]["function"].update(arguments='{"q": "x"}'),
            "messages[2].tool_calls[0].function.arguments: a 'search' call without a query",
        ),
        (lambda m: m.pop(3), "messages[2].tool_calls[0]: no tool message answers this call"),
        (lambda m: m.pop(), "messages[3]: the conversation ends with a tool message"),
        (lambda m: m[4].update(content="  "), "messages[4].content: the final assistant message is empty"),
    ],
)
def test_an_agents_format_error_names_message_and_field_and_keeps_the_steps(edit: Any, reason: str) -> None:
    parsed = _broken(edit)
    assert parsed.error is not None and parsed.error.reason.startswith(reason), parsed.error
    assert MALFORMED_KEY not in parsed.extras  # stored as an invalid trajectory, not refused
    assert parsed.steps and parsed.steps[0].kind is StepKind.SEARCH


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda m: m[1].update(role="robot"), "messages[1].role"),
        (lambda m: m.__setitem__(1, "hello"), "messages[1]"),
        (lambda m: m[1].update(content=3), "messages[1].content"),
        (lambda m: m[1].update(content=["x"]), "messages[1].content[0]"),
        (lambda m: m[2].update(tool_calls={"id": "c1"}), "messages[2].tool_calls"),
        (lambda m: m[2]["tool_calls"][0].pop("function"), "messages[2].tool_calls[0].function"),
        (lambda m: m[2]["tool_calls"][0]["function"].pop("name"), "messages[2].tool_calls[0].function.name"),
        (
            lambda m: m[2]["tool_calls"][0]["function"].update(arguments=7),
            "messages[2].tool_calls[0].function.arguments",
        ),
        (lambda m: m[3].update(tool_call_id="zz"), "messages[3].tool_call_id"),
        (lambda m: m.insert(1, {"role": "tool", "content": "x"}), "messages[1]"),
        (lambda m: m[1].update(tool_calls=[call("u", "search", "{}")]), "messages[1].tool_calls"),
    ],
)
def test_a_malformed_log_names_message_and_field_and_is_marked_malformed(edit: Any, field: str) -> None:
    parsed = _broken(edit)
    assert parsed.error is not None and parsed.error.reason.startswith(f"{field}: "), parsed.error
    assert parsed.extras[MALFORMED_KEY] == field


def test_not_a_list_or_not_json_is_malformed_at_messages() -> None:
    for parsed in (parse_chat_messages({"role": "user"}), parse_chat_messages([]), parse_chat("{oops")):
        assert parsed.error is not None and parsed.extras[MALFORMED_KEY] == "messages"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "x"])},
    optional={
        "content": st.none() | st.text(max_size=20) | JSON,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {
                    "function": st.fixed_dictionaries(
                        {
                            "name": st.sampled_from(["search", "calc", ""]),
                            "arguments": JSON | st.text(max_size=20),
                        }
                    )
                },
                optional={"id": st.sampled_from(["a", "b"]) | JSON},
            ),
            max_size=3,
        )
        | JSON,
        "tool_call_id": st.sampled_from(["a", "b"]) | JSON,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MESSAGE, max_size=6) | JSON)
def test_the_parser_never_raises_and_its_text_parses_back(messages: Any) -> None:
    parsed = parse_chat_messages(messages)
    assert parsed.format == CHAT_FORMAT
    if isinstance(messages, list):
        assert parsed.text == chat_text(messages)
        assert parse_chat(parsed.text) == parsed
    assert all(step.kind is not StepKind.SEARCH or step.query is not None for step in parsed.steps)


GOLD = ["William Shakespeare"]


def test_search_r1_scores_a_chat_trajectory_with_its_outcome_and_format_rewards() -> None:
    parsed = parse_chat_messages(conversation())
    assert score_chat("search_r1", parsed, GOLD, params={"reward": "outcome"}).reward.total == 1.0
    assert score_chat("search_r1", parsed, ["Marlowe"], params={"retrieval_score": 0.1}).reward.total == 0.2
    unanswered = _broken(lambda m: m[2]["tool_calls"][0]["function"].update(arguments="{"))
    # invalid chat format with a right answer: 1 - structure_format_score, as for a tag trajectory
    assert score_chat("search_r1", unanswered, GOLD).reward.total == pytest.approx(0.8)


def test_hiprag_scores_each_step_with_its_verdict_and_the_same_equation_as_tags() -> None:
    parsed = parse_chat_messages(conversation())
    # HiPRAG Eq. 1: A(1-λf) + λf·F + λp·N_corr/N when A = F = 1; the search step was over-search, the answer step fine
    reward = score_chat("hiprag", parsed, GOLD, judgements={"step_flags": [True, False]}).reward
    assert reward.total == pytest.approx(1.0 + 0.4 * 1 / 2)
    with pytest.raises(MissingVerdict):
        score_chat("hiprag", parsed, GOLD, judgements={"step_flags": [True]})
    tag = score(
        "search_r1",
        "<think>I should look it up.</think><search>Hamlet author</search><information>Doc 1 (Title: Hamlet) a tragedy by William Shakespeare</information>"
        "<think>x</think><answer>William Shakespeare</answer>",
        GOLD,
    )
    assert score_chat("search_r1", parsed, GOLD).reward == tag.reward


def test_tiresrag_reads_the_first_and_last_answer_for_reflection() -> None:
    messages = conversation()
    messages.insert(2, {"role": "assistant", "content": "<answer>Marlowe</answer>? Not sure."})
    reward = score_chat(
        "tiresrag",
        parse_chat_messages(messages),
        GOLD,
        params={"step": 90, "total_steps": 100},
        judgements={"sufficiency": True, "thinking": 0.5},
    ).reward
    assert reward.components["reflection"] == 1.0 and reward.components["answer"] == 1.0


@pytest.mark.parametrize("method", sorted(NOT_APPLICABLE))
def test_methods_without_chat_step_semantics_are_refused_with_the_reason(method: str) -> None:
    with pytest.raises(ScoringInputError) as raised:
        score_chat(method, parse_chat_messages(conversation()), GOLD)
    assert raised.value.field == "method" and "does not apply to chat trajectories" in raised.value.message


def test_a_malformed_log_is_not_scored_and_names_its_field() -> None:
    with pytest.raises(ScoringInputError) as raised:
        score_chat("search_r1", _broken(lambda m: m[1].update(role="robot")), GOLD)
    assert raised.value.field == "messages[1].role"


def test_the_batch_gives_hiprag_ablations_the_batch_average_bonus() -> None:
    searched = parse_chat_messages(conversation())
    no_search = parse_chat_messages(
        [conversation()[1], {"role": "assistant", "content": "William Shakespeare"}]
    )
    assert no_search.valid and no_search.n_searches == 0
    results = score_chat_batch(
        "hiprag",
        [(searched, GOLD, {"step_flags": [False, False]}), (no_search, GOLD, {"step_flags": [False]})],
        params={"process": "over_only"},
    )
    assert all(isinstance(r, Scored) for r in results)
    # HiPRAG Sec. 5.3: the trajectory without a search step gets the batch's average bonus, λp·1/1 from the first
    assert [r.reward.components["process_bonus"] for r in results if isinstance(r, Scored)] == [0.4, 0.4]
