"""Search-P1: the trajectory parser, the path-centric reward (Eqs. 4–8, Algorithm 3), prompts and reply parsing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.formats.searchp1 import SearchP1FormatFacts, parse_searchp1, searchp1_format_facts
from scoring.judging.searchp1 import (
    DUAL_TRACK_EVALUATOR_PROMPT,
    INFERENCE_PROMPT,
    REFERENCE_PLANNER_PROMPT,
    ReferencePlan,
    evaluator_messages,
    inference_messages,
    parse_evaluator_reply,
    parse_reference_planner,
    reference_planner_messages,
)
from scoring.rewards.searchp1 import (
    SearchP1Evaluation,
    Variant,
    format_reward,
    path_reward,
    reference_alignment_score,
    reference_alignment_score_alg3,
    searchp1_reward,
    searchp1_reward_from_parts,
    self_consistency_score,
    self_consistency_score_alg3,
    soft_outcome_reward,
)
from scoring.verdicts import MissingVerdict, Verdict
from tests.conftest import shared_dir

# The paper's own case study (Fig. 11, SEARCH-P1 column), closed with the <answer> its "Final: ✓" stands for.
FIG11 = (
    "<reasoning> I need to: 1. Find the band performing “Bang Bang Rock & Roll”. 2. Find the lead singer. "
    "</reasoning> <tool_call> “Bang Bang Rock & Roll” album </tool_call> <tool_response> “Bang Bang Rock & Roll” "
    "is the debut album by British rock band Art Brut... </tool_response> <tool_call> lead singer of Art Brut "
    "</tool_call> <tool_response> ...frontman Eddie Argos’ enthusiastic vocal delivery... </tool_response> "
    "<answer> Eddie Argos </answer>"
)
R = "<reasoning>1. Find X.</reasoning>"
CALL = "<tool_call>x</tool_call><tool_response>doc</tool_response>"


@pytest.mark.parametrize(
    ("text", "error", "plan", "kinds", "queries", "answers"),
    [
        # the paper's Fig. 11: the plan is the first <reasoning>'s inline list; the second call has no reasoning
        pytest.param(
            FIG11,
            None,
            ("Find the band performing “Bang Bang Rock & Roll”.", "Find the lead singer."),
            ("search", "search"),
            ("“Bang Bang Rock & Roll” album", "lead singer of Art Brut"),
            ("Eddie Argos",),
            id="paper-fig11",
        ),
        # the reasoning before the answer is its own NON_SEARCH turn
        pytest.param(
            R + CALL + "<reasoning>so Y</reasoning><answer>Y</answer>",
            None,
            ("Find X.",),
            ("search", "non_search"),
            ("x", None),
            ("Y",),
            id="final-reasoning-turn",
        ),
        # answering straight from the plan is a valid format (it just earns the soft format reward at most)
        pytest.param(R + "<answer>Y</answer>", None, ("Find X.",), ("non_search",), (None,), ("Y",), id="no-search"),
        # Qwen-style JSON tool call: the query argument is the query
        pytest.param(
            R + '<tool_call>{"name": "search", "arguments": {"query": "Art Brut singer"}}</tool_call>'
            "<tool_response>d</tool_response><answer>Y</answer>",
            None,
            ("Find X.",),
            ("search",),
            ("Art Brut singer",),
            ("Y",),
            id="json-call",
        ),
        # OpenAI-style: arguments is itself a JSON string
        pytest.param(
            R + '<tool_call>{"name": "search", "arguments": "{\\"query\\": \\"q2\\"}"}</tool_call>'
            "<tool_response>d</tool_response><answer>Y</answer>",
            None,
            ("Find X.",),
            ("search",),
            ("q2",),
            ("Y",),
            id="json-call-string-arguments",
        ),
        # retrieved documents are opaque: an <answer> quoted inside them is not the model's answer
        pytest.param(
            R + "<tool_call>x</tool_call><tool_response>a <answer>no</answer> <reasoning></tool_response>"
            "<answer>Y</answer>",
            None,
            ("Find X.",),
            ("search",),
            ("x",),
            ("Y",),
            id="tags-inside-documents",
        ),
        # Algorithm 2 prefills "<reasoning>": a text without it does not open with the plan
        pytest.param(CALL + "<answer>Y</answer>", "must open with the <reasoning> plan", (), ("search",), ("x",), ("Y",), id="no-plan"),
        # prose outside the tags breaks the format, and the steps are still recovered
        pytest.param(R + "hmm" + CALL + "<answer>Y</answer>", "outside any block", ("Find X.",), ("search",), ("x",), ("Y",), id="text-outside"),
        # the environment always answers a call (Alg. 2 line 11); a call with no response is a broken trajectory
        pytest.param(R + "<tool_call>x</tool_call><answer>Y</answer>", "<tool_call> without a <tool_response>", ("Find X.",), ("search",), ("x",), ("Y",), id="call-without-response"),
        # a response the model wrote itself, with no call before it
        pytest.param(R + CALL + "<tool_response>fake</tool_response><answer>Y</answer>", "without a <tool_call> before it", ("Find X.",), ("search", "non_search"), ("x", None), ("Y",), id="orphan-response"),
        # "Execute only ONE search query per turn": two calls before one response
        pytest.param(R + "<tool_call>a</tool_call><tool_call>b</tool_call><tool_response>d</tool_response><answer>Y</answer>", "<tool_call> without a <tool_response>", ("Find X.",), ("search", "search"), ("a", "b"), ("Y",), id="two-calls-one-turn"),
        # one reasoning per turn
        pytest.param(R + "<reasoning>again</reasoning>" + CALL + "<answer>Y</answer>", "two <reasoning> blocks in a row", ("Find X.",), ("non_search", "search"), (None, "x"), ("Y",), id="two-reasonings"),
        # Alg. 2 stops at the first answer: a second one, or anything after it, is invalid (both kept)
        pytest.param(R + CALL + "<answer>A</answer><answer>B</answer>", "more than one <answer>", ("Find X.",), ("search",), ("x",), ("A", "B"), id="two-answers"),
        pytest.param(R + CALL + "<answer>A</answer>" + CALL, "<tool_call> after the <answer>", ("Find X.",), ("search", "search"), ("x", "x"), ("A",), id="call-after-answer"),
        # a block opened inside another is reported where it opens; both blocks are recovered
        pytest.param("<reasoning>plan <tool_call>x</tool_call><tool_response>d</tool_response><answer>Y</answer>", "<tool_call> opened inside <reasoning>", ("plan",), ("search",), ("x",), ("Y",), id="unclosed-reasoning"),
        # truncated generation: the answer never closes, its text is not an answer
        pytest.param(R + CALL + "<answer>Eddie", "<answer> is never closed", ("Find X.",), ("search",), ("x",), ("Eddie",), id="unclosed-answer"),
        pytest.param(R + CALL, "no <answer> block", ("Find X.",), ("search",), ("x",), (), id="no-answer"),
        pytest.param("", "no <answer> block", (), (), (), (), id="empty"),
        # a stray closing tag
        pytest.param(R + "</tool_call>" + CALL + "<answer>Y</answer>", "</tool_call> without an opening", ("Find X.",), ("search",), ("x",), ("Y",), id="stray-close"),
        # a call must hold a query: empty, unreadable JSON, JSON without a query argument
        pytest.param(R + "<tool_call> </tool_call><tool_response>d</tool_response><answer>Y</answer>", "empty <tool_call>", ("Find X.",), ("search",), ("",), ("Y",), id="empty-call"),
        pytest.param(R + '<tool_call>{"query": </tool_call><tool_response>d</tool_response><answer>Y</answer>', "not valid JSON", ("Find X.",), ("search",), ('{"query":',), ("Y",), id="broken-json-call"),
        pytest.param(R + '<tool_call>{"name": "search"}</tool_call><tool_response>d</tool_response><answer>Y</answer>', 'no non-empty string "query"', ("Find X.",), ("search",), ('{"name": "search"}',), ("Y",), id="json-call-no-query"),
    ],
)  # fmt: skip
def test_it_parses_search_p1_trajectories(
    text: str,
    error: str | None,
    plan: tuple[str, ...],
    kinds: tuple[str, ...],
    queries: tuple[str | None, ...],
    answers: tuple[str, ...],
) -> None:
    trajectory = parse_searchp1(text)
    if error is None:
        assert trajectory.error is None
    else:
        assert trajectory.error is not None and error in trajectory.error.reason
    assert trajectory.plan == plan
    assert tuple(step.kind.value for step in trajectory.steps) == kinds
    assert tuple(step.query for step in trajectory.steps) == queries
    assert trajectory.answers == answers


def test_it_reports_the_earliest_error_and_its_position() -> None:
    text = R + "junk" + "<tool_call>x</tool_call><answer>Y</answer>"
    trajectory = parse_searchp1(text)
    assert trajectory.error is not None
    assert trajectory.error.position == text.index("junk")


def test_it_keeps_step_offsets_and_contexts() -> None:
    trajectory = parse_searchp1(FIG11)
    second = trajectory.steps[1]
    assert FIG11[second.start :].startswith("<tool_call> lead singer")
    assert second.raw.endswith("</tool_response>")
    assert second.context == "...frontman Eddie Argos’ enthusiastic vocal delivery..."
    assert trajectory.steps[0].reasoning.startswith("I need to: 1.")


@pytest.mark.parametrize(
    ("reasoning", "plan"),
    [
        # one numbered item per line; prose after the list is not part of the last item
        pytest.param("Plan:\n1. Find A\n2. Find B\nLet me start.", ("Find A", "Find B"), id="lines"),
        pytest.param("Step 1: find A\nStep 2: find B", ("find A", "find B"), id="step-n"),
        pytest.param("(1) find A (2) find B", ("find A", "find B"), id="parenthesised"),
        pytest.param("Sub-question 1: who? Sub-question 2: when?", ("who?", "when?"), id="sub-question"),
        # numbers that are not a 1, 2, 3… sequence are not list markers
        pytest.param("In 1998. it was 3. big\n1. A", ("A",), id="stray-numbers"),
        pytest.param("- A\n* B\n• C", ("A", "B", "C"), id="bullets"),
        # the paper does not say how to count an unstructured plan: the block is one step
        pytest.param("  I will search  for X.  ", ("I will search for X.",), id="unstructured"),
        pytest.param("   ", (), id="blank"),
    ],
)
def test_it_reads_the_planner_steps(reasoning: str, plan: tuple[str, ...]) -> None:
    assert parse_searchp1(f"<reasoning>{reasoning}</reasoning><answer>a</answer>").plan == plan


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        pytest.param(FIG11, SearchP1FormatFacts(True, True, True, True), id="valid"),
        # invalid but searched and answered: Algorithm 3's soft branch
        pytest.param(R + "x" + CALL + "<answer>Y</answer>", SearchP1FormatFacts(False, True, True, True), id="invalid-searched"),
        # a hallucinated response without a call still counts as a tool response (HASTOOLRESPONSE)
        pytest.param(R + "<tool_response>d</tool_response><answer>Y</answer>", SearchP1FormatFacts(False, True, False, True), id="orphan-response"),
        # an empty answer is no answer
        pytest.param(R + CALL + "<answer> </answer>", SearchP1FormatFacts(True, False, True, True), id="empty-answer"),
        pytest.param(R + "<tool_call>x</tool_call><answer>Y</answer>", SearchP1FormatFacts(False, True, True, False), id="no-response"),
    ],
)  # fmt: skip
def test_it_derives_the_algorithm_3_format_facts(text: str, facts: SearchP1FormatFacts) -> None:
    assert searchp1_format_facts(parse_searchp1(text)) == facts


def _evaluation(
    planner: float = 1.0, plan: int = 2, self_: int = 2, ref: int = 1, acc: float = 0.5, reason: float = 0.8
) -> SearchP1Evaluation:
    return SearchP1Evaluation(planner, plan, self_, ref, acc, reason)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # Eq. 6: 0.6 × 1/2 × 1/3
        pytest.param(self_consistency_score(0.6, 1, 2, 3), 0.09999999999999999, id="eq6"),
        # Eq. 6 with no tool call: zero denominator → 0 (the paper is silent)
        pytest.param(self_consistency_score(1.0, 2, 3, 0), 0.0, id="eq6-no-actions"),
        # more executed steps than tool calls: efficiency capped at 1, not 2
        pytest.param(self_consistency_score(1.0, 2, 2, 1), 1.0, id="eq6-efficiency-cap"),
        # Eq. 7: 1/2 × 1/2
        pytest.param(reference_alignment_score(1, 2, 2), 0.25, id="eq7"),
        pytest.param(reference_alignment_score(1, 0, 1), 0.0, id="eq7-empty-reference"),
        # Algorithm 3 drops the efficiency ratio; planner 1.2 makes S_self exceed 1
        pytest.param(self_consistency_score_alg3(1.2, 2, 2), 1.2, id="alg3-self"),
        pytest.param(reference_alignment_score_alg3(1, 2), 0.5, id="alg3-ref"),
        pytest.param(path_reward(0.2, 0.7), 0.7, id="max-of-tracks"),
        # Eq. 8: α·r_acc + (1−α)·r_reason, exactly 0.6 (0.8·0.5 + 0.2·1.0 would be 0.6000000000000001)
        pytest.param(soft_outcome_reward(False, 0.5, 1.0), 0.6, id="eq8-soft"),
        pytest.param(soft_outcome_reward(True, 0.0, 0.0), 1.0, id="eq8-correct"),
        # Algorithm 3 format reward: full, soft, invalid
        pytest.param(format_reward(SearchP1FormatFacts(True, True, True, False)), 0.1, id="format-full"),
        pytest.param(format_reward(SearchP1FormatFacts(False, True, False, True)), 0.05, id="format-soft"),
        pytest.param(format_reward(SearchP1FormatFacts(True, False, True, True)), None, id="format-invalid"),
    ],
)
def test_the_equations(value: float | None, expected: float | None) -> None:
    assert value == expected


@pytest.mark.parametrize(
    ("golds", "variant", "expected"),
    [
        # Fig. 11 trajectory, correct: 0.3·R_path + 0.6·1 + 0.1·0.1 with R_path = max(1·2/2·2/2, 1/2·1/2) = 1
        pytest.param(["Eddie Argos"], "main", {"R_format": 0.1, "S_self": 1.0, "S_ref": 0.25, "R_path": 1.0, "R_outcome": 1.0}, id="fig11-correct"),
        # wrong gold: soft outcome 0.8·0.5 + 0.2·0.8 = 0.56
        pytest.param(["Dan Auerbach"], "main", {"R_format": 0.1, "S_self": 1.0, "S_ref": 0.25, "R_path": 1.0, "R_outcome": 0.56}, id="fig11-wrong"),
        # Algorithm 3: S_ref = 1/2 without the efficiency factor
        pytest.param("Eddie Argos", "alg3", {"R_format": 0.1, "S_self": 1.0, "S_ref": 0.5, "R_path": 1.0, "R_outcome": 1.0}, id="fig11-alg3"),
    ],
)  # fmt: skip
def test_it_scores_the_papers_case_study(
    golds: str | list[str], variant: Variant, expected: dict[str, float]
) -> None:
    reward = searchp1_reward(parse_searchp1(FIG11), golds, _evaluation(), n_ref_steps=2, variant=variant)
    assert dict(reward.components) == expected
    assert reward.total == pytest.approx(0.3 * expected["R_path"] + 0.6 * expected["R_outcome"] + 0.01)


def test_an_invalid_trajectory_earns_nothing_and_needs_no_evaluation() -> None:
    reward = searchp1_reward(parse_searchp1(R + CALL), ["Y"], None, n_ref_steps=2)
    assert (reward.total, dict(reward.components)) == (0.0, {"R_format": 0.0})


@pytest.mark.parametrize(
    ("evaluation", "n_ref_steps", "message"),
    [
        # a missing / unparseable evaluation is never read as zero
        pytest.param(None, 2, "missing", id="missing"),
        # the judge counted more covered steps than the reference has
        pytest.param(_evaluation(ref=3), 2, "reference path has 2", id="too-many-covered"),
    ],
)
def test_it_refuses_an_unusable_evaluation(
    evaluation: SearchP1Evaluation | None, n_ref_steps: int, message: str
) -> None:
    with pytest.raises(MissingVerdict, match=message):
        searchp1_reward(parse_searchp1(FIG11), ["Eddie Argos"], evaluation, n_ref_steps=n_ref_steps)


def test_it_rejects_an_unknown_variant() -> None:
    with pytest.raises(ValueError, match="unknown Search-P1 variant"):
        searchp1_reward(parse_searchp1(FIG11), ["x"], _evaluation(), n_ref_steps=2, variant="b2")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"planner": 1.3}, id="planner-above-1.2"),  # the rubric tops out at 1.2
        pytest.param({"acc": -0.1}, id="negative-acc"),
        pytest.param({"reason": math.nan}, id="nan-reason"),
        pytest.param({"self_": 3}, id="executed-more-than-planned"),
        pytest.param({"ref": -1}, id="negative-count"),
    ],
)
def test_an_evaluation_outside_the_rubric_cannot_be_built(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        _evaluation(**kwargs)  # type: ignore[arg-type]


def test_the_prompts_are_the_papers_figures_verbatim() -> None:
    prompts = shared_dir() / "reference" / "prompts"
    for constant, name in (
        (INFERENCE_PROMPT, "searchp1_paper_fig7_inference_prompt.txt"),
        (REFERENCE_PLANNER_PROMPT, "searchp1_paper_fig8_reference_planner_prompt.txt"),
        (DUAL_TRACK_EVALUATOR_PROMPT, "searchp1_paper_fig9_dual_track_evaluator_prompt.txt"),
    ):
        assert constant == Path(prompts / name).read_text(encoding="utf-8").removesuffix("\n")


def test_the_message_builders_fill_every_field() -> None:
    (inference,) = inference_messages("Who sang it?")
    assert inference["role"] == "user" and inference["content"].endswith("Question:Who sang it?")
    (planner,) = reference_planner_messages("Q?", ["Eddie Argos", "Argos"])
    assert "Correct Answer:['Eddie Argos', 'Argos']" in planner["content"]
    reference = ReferencePlan(("album", "singer"), "first search the album")
    (evaluator,) = evaluator_messages("Q?", "A", reference, '{"x": "{question}"}')
    content = evaluator["content"]
    assert "• Reference Path: 1. album\n2. singer\n" in content
    assert "• Reference Planner: first search the album\n" in content
    # a trajectory holding braces or a field name is inserted as is, not formatted again
    assert '• Model Trajectory: {"x": "{question}"}\n' in content
    assert "{" not in content.replace('{"x": "{question}"}', "")


VALID = {
    "planner_score": 1.0,
    "model_plan_steps": 2,
    "effective_steps_self": 2,
    "effective_steps_ref": 1,
    "outcome_accuracy_score": 0.5,
    "outcome_reasoning_score": 0.8,
}


def _reply(**changes: object) -> str:
    return json.dumps({**VALID, **changes})


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        pytest.param(_reply(), None, id="valid"),
        # one fenced JSON block is still JSON; an extra explanation field is ignored
        pytest.param("```json\n" + _reply(explanation="ok") + "\n```", None, id="fenced-with-extra-field"),
        # a count written as 2.0 is a count of 2
        pytest.param(_reply(model_plan_steps=2.0), None, id="integral-float-count"),
        pytest.param("", "not one JSON object", id="empty"),
        # prose around the JSON: the prompt asks for JSON only
        pytest.param("Here you go: " + _reply(), "not one JSON object", id="prose-around"),
        pytest.param("[1, 2]", "not an object", id="array"),
        pytest.param(json.dumps({k: v for k, v in VALID.items() if k != "effective_steps_ref"}), "missing field(s): effective_steps_ref", id="missing-field"),
        pytest.param(_reply(planner_score="1.0"), "must be a number", id="string-score"),
        pytest.param(_reply(outcome_accuracy_score=True), "must be a number", id="bool-score"),
        pytest.param(_reply(planner_score=0.8), "not one of the rubric's levels", id="off-level"),
        pytest.param(_reply(planner_score=5), "outside [0.2, 1.2]", id="out-of-range"),
        pytest.param(_reply(planner_score=10**300), "outside", id="huge-int-score"),
        pytest.param(_reply(outcome_reasoning_score=None), "must be a number", id="null-score"),
        pytest.param(_reply(effective_steps_self=1.5), "whole number", id="fractional-count"),
        pytest.param(_reply(effective_steps_ref=-1), "must lie in [0", id="negative-count"),
        pytest.param(_reply(model_plan_steps=10**100, effective_steps_self=10**100), "must lie in [0", id="absurd-count"),
        pytest.param(_reply(effective_steps_self=3), "exceeds model_plan_steps", id="more-executed-than-planned"),
        # Python's json reads NaN, Infinity and 1e999 as floats: none is a valid score
        pytest.param(_reply().replace("0.5", "NaN"), "NaN is not a JSON number", id="nan"),
        pytest.param(_reply().replace("0.5", "1e999"), "outside", id="overflowing-float"),
        # a duplicated key is ambiguous, not "the last one wins"
        pytest.param(_reply()[:-1] + ', "planner_score": 1.2}', "duplicate key 'planner_score'", id="duplicate-key"),
        pytest.param("[" * 100_000, "not one JSON object", id="deeply-nested"),
    ],
)  # fmt: skip
def test_it_parses_evaluator_replies_strictly(reply: str, reason: str | None) -> None:
    parsed = parse_evaluator_reply(reply)
    if reason is None:
        assert parsed.evaluation == _evaluation()
        assert parsed.verdict is None
    else:
        assert parsed.evaluation is None and parsed.verdict is Verdict.UNPARSEABLE
        assert reason in parsed.reason


def test_it_checks_covered_steps_against_the_reference_and_can_relax_levels() -> None:
    assert "exceeds the reference path's 0 steps" in parse_evaluator_reply(_reply(), n_ref_steps=0).reason
    relaxed = parse_evaluator_reply(_reply(planner_score=0.8), strict_levels=False).evaluation
    assert relaxed is not None and relaxed.planner_score == 0.8


@pytest.mark.parametrize(
    ("reply", "path", "reason"),
    [
        pytest.param(
            "<correct_reasoning_path>\n1. Bang Bang Rock & Roll album\n2. Art Brut lead singer\n</correct_reasoning_path>\n"
            "<optimized_planner>\nFirst find the band, then its singer.\n</optimized_planner>",
            ("Bang Bang Rock & Roll album", "Art Brut lead singer"),
            None,
            id="valid",
        ),
        pytest.param("<optimized_planner>p</optimized_planner>", None, "one <correct_reasoning_path> block, found 0", id="no-path"),
        pytest.param("<correct_reasoning_path>1. a</correct_reasoning_path>", None, "one <optimized_planner> block, found 0", id="no-planner"),
        pytest.param("<correct_reasoning_path>- a</correct_reasoning_path><optimized_planner>p</optimized_planner>", None, "not a numbered item", id="bullets"),
        pytest.param("<correct_reasoning_path>2. a</correct_reasoning_path><optimized_planner>p</optimized_planner>", None, "out of order", id="starts-at-2"),
        pytest.param("<correct_reasoning_path>1.</correct_reasoning_path><optimized_planner>p</optimized_planner>", None, "is empty", id="empty-item"),
        pytest.param("<correct_reasoning_path> </correct_reasoning_path><optimized_planner>p</optimized_planner>", None, "path is empty", id="empty-path"),
        pytest.param("<correct_reasoning_path>1. a</correct_reasoning_path><optimized_planner> </optimized_planner>", None, "planner is empty", id="empty-planner"),
    ],
)  # fmt: skip
def test_it_parses_reference_planner_replies(
    reply: str, path: tuple[str, ...] | None, reason: str | None
) -> None:
    parsed = parse_reference_planner(reply)
    if path is None:
        assert parsed.plan is None and parsed.verdict is Verdict.UNPARSEABLE
        assert reason is not None and reason in parsed.reason
    else:
        assert parsed.plan is not None and parsed.plan.path == path
        assert parsed.plan.planner == "First find the band, then its singer."


TAGS = [
    "<reasoning>", "</reasoning>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
    "<answer>", "</answer>", "1. ", "\n2. ", '{"query": ', '{"arguments": "', "}", '"', "{", "\n", " ",
]  # fmt: skip
tag_soup = st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=6)), max_size=40).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=st.one_of(st.text(), tag_soup))
def test_the_parser_never_raises(text: str) -> None:
    trajectory = parse_searchp1(text)
    assert trajectory.text == text and trajectory.format == "search_p1"
    if trajectory.error is not None:
        assert 0 <= trajectory.error.position <= len(text)
    assert [step.index for step in trajectory.steps] == list(range(len(trajectory.steps)))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
evaluator_like = st.fixed_dictionaries(
    {name: st.one_of(st.sampled_from([0, 0.2, 0.5, 0.8, 1.0, 1.2, 2, 3]), json_values) for name in VALID}
).map(json.dumps)


@settings(max_examples=500, deadline=None)
@given(reply=st.one_of(st.text(), evaluator_like, json_values.map(json.dumps)))
def test_the_reply_parsers_never_raise(reply: str) -> None:
    parsed = parse_evaluator_reply(reply, n_ref_steps=3)
    assert (parsed.evaluation is None) == bool(parsed.reason)
    planner = parse_reference_planner(reply)
    assert (planner.plan is None) == bool(planner.reason)


@settings(max_examples=500, deadline=None)
@given(
    facts=st.builds(SearchP1FormatFacts, st.booleans(), st.booleans(), st.booleans(), st.booleans()),
    planner=st.sampled_from([0.2, 0.6, 1.0, 1.2]),
    plan=st.integers(0, 8),
    executed=st.integers(0, 8),
    covered=st.integers(0, 8),
    n_ref=st.integers(0, 8),
    n_actions=st.integers(0, 8),
    acc=st.sampled_from([0.0, 0.5, 1.0]),
    reason=st.sampled_from([0.0, 0.5, 0.8, 1.0]),
    correct=st.booleans(),
    variant=st.sampled_from(["main", "alg3"]),
)
def test_r_total_stays_in_its_documented_range(
    facts: SearchP1FormatFacts,
    planner: float,
    plan: int,
    executed: int,
    covered: int,
    n_ref: int,
    n_actions: int,
    acc: float,
    reason: float,
    correct: bool,
    variant: Variant,
) -> None:
    evaluation = SearchP1Evaluation(planner, plan, min(executed, plan), min(covered, n_ref), acc, reason)
    reward = searchp1_reward_from_parts(
        facts=facts,
        evaluation=evaluation,
        n_actions=n_actions,
        n_ref_steps=n_ref,
        correct=correct,
        variant=variant,
    )
    if format_reward(facts) is None:
        assert reward.total == 0.0
    else:
        # [λf·0.05, λf·0.1 + λp·1.2 + λa] with the default weights; R_path may reach the planner's 1.2
        assert 0.005 - 1e-12 <= reward.total <= 0.97 + 1e-12
        assert 0.0 <= reward.components["R_path"] <= 1.2
        assert 0.0 <= reward.components["R_outcome"] <= 1.0
