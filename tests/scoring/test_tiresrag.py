"""TIRESRAG-R1: the trajectory format, the per-trajectory reward (Eqs. 1–5) and the judges, paper and released.
Group-level shaping and the released reward server's batch scoring are in test_tiresrag_group.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.formats.tiresrag import (
    extract_all_answers_reference,
    extract_answer_math_reference,
    get_qa_reference,
    is_valid_sequence_reference,
    parse_tiresrag,
    strip_sequence_reference,
)
from scoring.judging.tiresrag import (
    ANSWER_JUDGE_PROMPT_PAPER,
    SUFFICIENCY_SYSTEM_PROMPT,
    SUFFICIENCY_USER_TEMPLATE,
    THINKING_SYSTEM_PROMPT,
    THINKING_USER_TEMPLATE,
    ParseMissCounter,
    answer_judge_prompt,
    extract_information_and_others_reference,
    extract_question_reference,
    generate_reference,
    get_result_reference,
    parse_answer_judgement,
    parse_sufficiency_verdict,
    parse_thinking_score,
    reasoning_trajectory,
    split_information,
    sufficiency_messages,
    thinking_messages,
    thinking_score_reference,
)
from scoring.rewards.tiresrag import (
    answer_reward,
    dynamic_weight,
    reflection_reward,
    sufficiency_reward,
    thinking_reward,
    tiresrag_reward,
)
from scoring.rewards.tiresrag_reference import dynamic_weight_reference
from scoring.trajectory import StepKind
from scoring.verdicts import MissingVerdict, Verdict

T, F, U, E = Verdict.TRUE, Verdict.FALSE, Verdict.UNPARSEABLE, Verdict.ERROR
S, N = "search", "non_search"
GOLD = "Eddie Argos"
SEARCH_TURN = "<think>I need the band.</think><search>Bang Bang Rock & Roll</search><information>(1)Art Brut.</information>"
CHAT = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWho sings?<|im_end|>\n<|im_start|>assistant\n"


# --- the format -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error", "answers", "kinds"),
    [
        # one think, one answer: the smallest valid response
        pytest.param("<think>a</think><answer>X</answer>", None, ("X",), (N,), id="single-answer"),
        # a search turn: the documents come back in <information>, then the model thinks again
        pytest.param(f"{SEARCH_TURN}<think>b</think><answer> X </answer>", None, ("X",), (S, N), id="search"),
        # reflection: a first answer, a think, a second answer; both recorded, the last is the prediction
        pytest.param("<think>a</think><answer>X</answer>\n<think>r</think><answer>Y</answer>", None, ("X", "Y"), (N, N), id="reflection"),
        # reflection may search again before the second answer
        pytest.param(f"<think>a</think><answer>X</answer>{SEARCH_TURN}<think>b</think><answer>Y</answer>", None, ("X", "Y"), (N, S, N), id="reflection-search"),
        # the training prompt ends with "<think>", so a bare response starts inside the first think
        pytest.param("I need to check.</think><answer>X</answer>", None, ("X",), (N,), id="implicit-think"),
        # blank text between blocks is fine (the environment inserts newlines around <information>)
        pytest.param("<think>a</think>\n<search>q</search>\n\n<information>d</information>\n\n<think>b</think>\n<answer>X</answer>\n", None, ("X",), (S, N), id="whitespace"),
        # the paper's model thinks after the documents before answering; the released check allows skipping that
        pytest.param(f"{SEARCH_TURN}<answer>X</answer>", f"<answer> after </information>; expected <think> (at character {len(SEARCH_TURN)})", ("X",), (S, N), id="answer-after-information"),
        # one chance to reflect: a third answer round is a format error (located at the third round's think)
        pytest.param("<think>a</think><answer>1</answer><think>b</think><answer>2</answer><think>c</think><answer>3</answer>", "a third round after the second answer: the format allows one reflection (at character 68)", ("1", "2", "3"), (N, N, N), id="third-answer"),
        # a reflection that never answers again: the response must end with </answer>
        pytest.param("<think>a</think><answer>X</answer><think>r</think>", "the response must end with </answer>, but it ends with </think> (at character 50)", ("X",), (N, N), id="ends-in-think"),
        # two answers back to back (released: allowed) lack the reflection's reasoning
        pytest.param("<think>a</think><answer>X</answer><answer>Y</answer>", "<answer> after </answer>; expected <think> (at character 34)", ("X", "Y"), (N, N), id="answer-after-answer"),
        # an unclosed think runs into the search: reported where the search starts, the step still recovered
        pytest.param("<think>A\n<search>q</search><information>d</information><think>b</think><answer>X</answer>", "<think> is not closed before <search> (at character 9)", ("X",), (S, N), id="unclosed-think"),
        # prose outside the tags, located at its first non-blank character
        pytest.param("<think>a</think>  so: <answer>X</answer>", "unexpected text 'so:' outside the tags (at character 18)", ("X",), (N,), id="stray-text"),
        # a search the environment never answered
        pytest.param("<think>a</think><search>q</search>", "the response must end with </answer>, but it ends with </search> (at character 34)", (), (S,), id="search-without-information"),
        # an unclosed answer is not an answer
        pytest.param("<think>a</think><answer>X", "<answer> is never closed (at character 16)", (), (N,), id="unclosed-answer"),
        # an answer nested in a think (the released extraction would still count it)
        pytest.param("<think>a <answer>X</answer></think><answer>Y</answer>", "<think> is not closed before <answer> (at character 9)", ("X", "Y"), (N, N), id="answer-in-think"),
        # a closing tag with nothing open
        pytest.param("<think>a</think></search><answer>X</answer>", "</search> without an opening <search> (at character 16)", ("X",), (N,), id="stray-closing"),
        # nothing at all
        pytest.param("", "the response must end with </answer>, but it ends with no tags at all (at character 0)", (), (), id="empty"),
        # an answer with no reasoning before it
        pytest.param("<answer>X</answer>", "<answer> at the start of the response; expected <think> (at character 0)", ("X",), (N,), id="no-think"),
    ],
)  # fmt: skip
def test_it_checks_the_paper_format(
    text: str, error: str | None, answers: tuple[str, ...], kinds: tuple[str, ...]
) -> None:
    trajectory = parse_tiresrag(text)
    assert (str(trajectory.error) if trajectory.error else None) == error
    assert trajectory.answers == answers
    assert tuple(step.kind.value for step in trajectory.steps) == kinds


def test_it_recovers_each_turn_with_its_reasoning_query_and_documents() -> None:
    text = f"{SEARCH_TURN}\n<think>Art Brut's singer.</think><answer>Eddie Argos</answer>"
    search, answer = parse_tiresrag(text).steps
    assert (search.kind, search.reasoning, search.query, search.context) == (
        StepKind.SEARCH,
        "I need the band.",
        "Bang Bang Rock & Roll",
        "(1)Art Brut.",
    )
    assert search.raw == SEARCH_TURN and search.start == 0
    assert (answer.kind, answer.reasoning, answer.query, answer.context) == (
        StepKind.NON_SEARCH,
        "Art Brut's singer.",
        None,
        None,
    )
    assert text[answer.start :].startswith("<think>Art Brut's") and answer.raw.endswith("</answer>")


def test_it_reads_the_response_and_question_out_of_a_chat_layout() -> None:
    # prompt + response as the trainer decodes it: offsets stay relative to the whole text, pads are ignored
    text = f"{CHAT}<think>x</think><answer>Y</answer><|im_end|><|endoftext|><|endoftext|>"
    trajectory = parse_tiresrag(text)
    assert trajectory.valid and trajectory.answer == "Y"
    assert trajectory.extras == {"question": "Who sings?"}
    assert trajectory.steps[0].start == len(CHAT)


def test_it_ignores_trailing_pad_tokens_of_a_bare_response() -> None:
    trajectory = parse_tiresrag("<think>x</think><answer>Y</answer><|endoftext|>\n<|endoftext|>")
    assert trajectory.valid and trajectory.answer == "Y"


TAGS = ["<think>", "</think>", "<search>", "</search>", "<information>", "</information>", "<answer>", "</answer>",
        "<|im_start|>user\n", "<|im_start|>assistant\n", "<|im_end|>", "<|endoftext|>", "\n", " "]  # fmt: skip
tag_soup = st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=6)), max_size=30).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(st.text(), tag_soup))
def test_it_never_raises_and_keeps_its_own_invariants(text: str) -> None:
    trajectory = parse_tiresrag(text)
    assert trajectory.text == text
    if trajectory.error is not None:
        assert 0 <= trajectory.error.position <= len(text)
    else:
        # a valid response ends in an answer turn and answers once or twice
        assert 1 <= len(trajectory.answers) <= 2
        assert trajectory.steps[-1].kind is StepKind.NON_SEARCH
    for step in trajectory.steps:
        assert text[step.start : step.start + len(step.raw)] == step.raw


# --- the released extraction and format check -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "last", "every"),
    [
        # the final answer is the text after the LAST <answer>
        pytest.param("<answer>X</answer><answer>Y</answer>", "Y", ["X", "Y"], id="two"),
        # no <answer>: the WHOLE text is the prediction (scored by F1 against the gold)
        pytest.param("<think>Eddie Argos</think>", "<think>Eddie Argos</think>", [], id="no-answer"),
        # an unclosed last answer: its remainder, but it is not among the closed answers
        pytest.param("<answer>X</answer><answer>Y and more", "Y and more", ["X"], id="unclosed"),
        # answers may span lines; both are stripped
        pytest.param("<answer>\n  multi\nline </answer>", "multi\nline", ["multi\nline"], id="multiline"),
    ],
)
def test_it_extracts_answers_like_the_released_code(text: str, last: str, every: list[str]) -> None:
    assert extract_answer_math_reference(text) == last
    assert extract_all_answers_reference(text) == every


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # released: an answer straight after the documents is fine (the paper format wants a think first)
        pytest.param("<think>a</think><search>q</search><information>d</information><answer>X</answer>", (True, "Valid sequence format"), id="answer-after-information"),
        # released: any number of answers
        pytest.param("<think>a</think><answer>1</answer><answer>2</answer><answer>3</answer>", (True, "Valid sequence format"), id="three-answers"),
        # search straight after documents is not allowed
        pytest.param("<think>a</think><search>q</search><information>d</information><search>r</search>", (False, "Unexpected tag <search> in state information"), id="search-after-information"),
        # counts are checked first
        pytest.param("<think>a</think><answer>X", (False, "Mismatch in answer tags: 1 opening vs 0 closing tags"), id="count"),
        # no implicit first think for the released check
        pytest.param("a</think><answer>X</answer>", (False, "Mismatch in think tags: 0 opening vs 1 closing tags"), id="no-implicit-think"),
    ],
)  # fmt: skip
def test_it_checks_the_format_like_the_released_code(text: str, expected: tuple[bool, str]) -> None:
    assert is_valid_sequence_reference(text) == expected


@pytest.mark.parametrize(
    ("query", "template", "expected"),
    [
        # qwen_chat: the user turn and the assistant turn, stripped
        pytest.param(f"{CHAT}<think>x</think><answer>Y</answer><|im_end|>", "qwen_chat", ("Who sings?", "<think>x</think><answer>Y</answer>"), id="chat"),
        # a truncated response keeps everything up to the end (the server appended the eos)
        pytest.param(f"{CHAT}<think>x<|endoftext|>", "qwen_chat", ("Who sings?", "<think>x<|endoftext|>"), id="chat-truncated"),
        # qwen_base: after "Question:" up to "\n<think>", and the rest up to <|endoftext|>
        pytest.param("Answer it.\nQuestion:Who sings?\n<think>x</think><answer>Y</answer><|endoftext|>", "qwen_base", ("Who sings?", "x</think><answer>Y</answer>"), id="base"),
    ],
)  # fmt: skip
def test_it_splits_queries_like_the_released_server(
    query: str, template: str, expected: tuple[str, str]
) -> None:
    assert get_qa_reference(query, template) == expected


def test_it_reproduces_the_released_failures_of_query_splitting() -> None:
    with pytest.raises(IndexError):  # no user turn in a qwen_chat query
        get_qa_reference("<think>x</think>", "qwen_chat")
    with pytest.raises(UnboundLocalError):  # an unknown template bound neither variable
        get_qa_reference(CHAT, "llama")
    assert (
        strip_sequence_reference(
            "<|endoftext|>ab<|endoftext|><|endoftext|>", "<|endoftext|>", "<|endoftext|>"
        )
        == "ab"
    )


# --- paper rewards ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        pytest.param("Eddie Argos", GOLD, 1.0, id="exact"),  # Eq. 1: token F1
        pytest.param("the Eddie Argos band", GOLD, 0.8, id="partial"),  # P = 2/3, R = 1
        pytest.param("Argos", ["Dan", GOLD], 2 / 3, id="best-gold"),  # maximised over golds
        pytest.param(None, GOLD, 0.0, id="no-answer"),  # silent in the paper: no answer scores 0
        pytest.param("yes", "no", 0.0, id="yes-no"),  # FlashRAG: a yes/no answer is right or wrong
    ],
)
def test_it_scores_the_answer_by_f1(prediction: str | None, golds: str | list[str], expected: float) -> None:
    assert answer_reward(prediction, golds) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        pytest.param(["Dan Auerbach", GOLD], 1.0, id="wrong-to-right"),  # Eq. 4: +1 (released code: 0)
        pytest.param([GOLD, "Dan Auerbach"], -1.0, id="right-to-wrong"),  # Eq. 4: −1
        # CEM is 1 both times (released: −1, because the F1 fell)
        pytest.param([GOLD, "Eddie Argos of Art Brut"], 0.0, id="right-to-right"),
        pytest.param(["Dan Auerbach", "Jack White"], 0.0, id="wrong-to-wrong"),  # "otherwise" (released: −1)
        pytest.param([GOLD], 0.0, id="no-reflection"),  # one answer: nothing to compare
        pytest.param(["Dan Auerbach"], 0.0, id="single-wrong"),  # released: −1
        pytest.param([], 0.0, id="no-answer"),
        pytest.param(["Dan", "Jack", GOLD], 1.0, id="first-vs-last"),  # silent: a_2 is the last answer
        # CEM needs every gold token: "Eddie" (F1 0.67) is wrong
        pytest.param(["Eddie", GOLD], 1.0, id="partial-is-wrong"),
    ],
)
def test_it_rewards_reflection_per_eq_4(answers: list[str], expected: float) -> None:
    assert reflection_reward(answers, GOLD) == expected


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        # Eq. 2: 1 when sufficient, 0 when not
        pytest.param(T, 1.0, id="sufficient"),
        pytest.param(F, 0.0, id="insufficient"),
        # an unusable verdict is never read as "insufficient"
        pytest.param(U, MissingVerdict, id="unparseable"),
        pytest.param(E, MissingVerdict, id="error"),
        pytest.param(None, MissingVerdict, id="missing"),
    ],
)
def test_it_takes_the_sufficiency_verdict(verdict: Verdict | None, expected: float | type[Exception]) -> None:
    if isinstance(expected, float):
        assert sufficiency_reward(verdict) == expected
    else:
        with pytest.raises(expected, match="sufficiency verdict"):
            sufficiency_reward(verdict)


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        pytest.param(0.7, 0.7, id="in-range"),
        # 0 is a real score (only the reference turns failures into 0)
        pytest.param(0.0, 0.0, id="zero-is-a-score"),
        # the closed interval's upper end
        pytest.param(1.0, 1.0, id="one"),
        # Eq. 3 says [0, 1]: out of range is a caller's mistake, not clipped (the released code passes 1.5 on)
        pytest.param(1.5, ValueError, id="above-range"),
        pytest.param(math.nan, ValueError, id="nan"),
        # a reply the parser could not read, or none at all: never a silent 0
        pytest.param(U, MissingVerdict, id="unparseable"),
        pytest.param(None, MissingVerdict, id="missing"),
    ],
)
def test_it_takes_the_thinking_score(
    score: float | Verdict | None, expected: float | type[Exception]
) -> None:
    if isinstance(expected, float):
        assert thinking_reward(score) == expected
    else:
        with pytest.raises(expected):
            thinking_reward(score)


@pytest.mark.parametrize(
    ("step", "total", "expected"),
    [
        pytest.param(0, 100, 1 / (1 + math.exp(-9)), id="start"),  # ≈1: auxiliary rewards count fully
        pytest.param(90, 100, 0.5, id="at-0.9T"),  # the midpoint of the main-text schedule
        pytest.param(100, 100, 1 / (1 + math.e), id="end"),
        pytest.param(10**6, 100, 0.0, id="far-past-no-overflow"),  # the released math.exp overflows here
    ],
)
def test_it_schedules_the_dynamic_weight_per_the_main_text(step: int, total: int, expected: float) -> None:
    assert dynamic_weight(step, total) == pytest.approx(expected, abs=1e-15)


def test_it_decreases_the_dynamic_weight_as_training_proceeds() -> None:
    # the reason the main-text form is the paper's: the appendix's (T − 0.9t)/10 would *increase* from ≈0
    weights = [dynamic_weight(t, 200) for t in range(0, 201, 20)]
    assert weights == sorted(weights, reverse=True)
    assert dynamic_weight(150, 200) == dynamic_weight_reference(150, 200)
    with pytest.raises(OverflowError):  # the released expression, kept verbatim
        dynamic_weight_reference(10**6, 100)


def test_it_combines_the_rewards_per_eq_5() -> None:
    trajectory = parse_tiresrag(
        f"<think>x</think><answer>Dan Auerbach</answer>{SEARCH_TURN}<think>y</think><answer>{GOLD}</answer>"
    )
    reward = tiresrag_reward(trajectory, GOLD, sufficiency=T, thinking=0.8, step=90, total_steps=100)
    # R_A = 1, a_t = 0.5, 0.6·0.8 + 0.3·1 + 0.3·(+1) = 1.08
    assert reward.total == pytest.approx(1.54)
    assert dict(reward.components) == pytest.approx(
        {"answer": 1.0, "sufficiency": 1.0, "thinking": 0.8, "reflection": 1.0, "dynamic_weight": 0.5}
    )
    with pytest.raises(MissingVerdict, match="thinking"):
        tiresrag_reward(trajectory, GOLD, sufficiency=T, thinking=U, step=90, total_steps=100)


words = st.sampled_from(["Eddie", "Argos", "Dan", "Auerbach", "the", "band", "yes", "no", ""])
answers_st = st.lists(st.lists(words, max_size=4).map(" ".join), max_size=3)


@given(
    answers=answers_st,
    gold=st.lists(words, min_size=1, max_size=3).map(" ".join),
    sufficient=st.booleans(),
    thinking=st.floats(0.0, 1.0),
    step=st.integers(0, 10_000),
    total=st.integers(1, 5_000),
)
def test_it_keeps_every_component_in_its_documented_range(
    answers: list[str], gold: str, sufficient: bool, thinking: float, step: int, total: int
) -> None:
    turns = "".join(f"<think>t</think><answer>{a}</answer>" for a in answers)
    reward = tiresrag_reward(
        parse_tiresrag(turns),
        gold,
        sufficiency=T if sufficient else F,
        thinking=thinking,
        step=step,
        total_steps=total,
    )
    parts = reward.components
    assert 0.0 <= parts["answer"] <= 1.0
    assert parts["sufficiency"] in (0.0, 1.0)
    assert 0.0 <= parts["thinking"] <= 1.0
    assert parts["reflection"] in (-1.0, 0.0, 1.0)
    assert 0.0 <= parts["dynamic_weight"] <= 1.0
    assert -0.3 - 1e-12 <= reward.total <= 2.2 + 1e-12


# --- judges -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        # Fig. 11's text, with the literal {{…}} of a never-formatted string
        pytest.param("sufficiency_system_prompt", SUFFICIENCY_SYSTEM_PROMPT, id="sufficiency-system"),
        # the code's user template, its indentation and trailing spaces included
        pytest.param("sufficiency_user_template", SUFFICIENCY_USER_TEMPLATE, id="sufficiency-user"),
        # Fig. 12's text, with en dashes
        pytest.param("thinking_system_prompt", THINKING_SYSTEM_PROMPT, id="thinking-system"),
        pytest.param("thinking_user_template", THINKING_USER_TEMPLATE, id="thinking-user"),
    ],
)
def test_it_uses_the_released_prompt_strings(reference_dir: Path, name: str, value: str) -> None:
    assert value == (reference_dir / "prompts" / f"tiresrag_{name}.txt").read_text(encoding="utf-8")


def test_it_builds_the_judge_messages_from_a_trajectory() -> None:
    trajectory = parse_tiresrag(
        f"{SEARCH_TURN}<think>so</think><answer>X</answer><think>ok</think><answer>Y</answer>"
    )
    rd = reasoning_trajectory(trajectory)
    assert rd == f"{SEARCH_TURN}<think>so</think><think>ok</think>"  # answers removed, reflection kept
    information, thinking = split_information(rd)
    assert information == "(1)Art Brut."
    assert (
        thinking
        == "<think>I need the band.</think><search>Bang Bang Rock & Roll</search>\n<think>so</think><think>ok</think>"
    )
    system, user = sufficiency_messages("Who?", GOLD, rd)
    assert system == {"role": "system", "content": SUFFICIENCY_SYSTEM_PROMPT}
    assert user["content"].startswith(
        "\n        ### QUESTION\n        Who?\n        ### ANSWER\n        Eddie Argos    \n"
    )
    assert thinking_messages("Who?", information, thinking)[1]["content"].endswith(
        f"{thinking}    \n        "
    )
    assert answer_judge_prompt("Q", "A", "P") == ANSWER_JUDGE_PROMPT_PAPER.format(
        question="Q", reference="A", prediction="P"
    )


@pytest.mark.parametrize(
    ("reply", "paper", "released"),
    [
        pytest.param('### JSON\n{"Sufficient Context To The Given Answer": 1}', T, 1, id="one"),
        pytest.param('{"Sufficient Context To The Given Answer": 0}', F, 0, id="zero"),
        # the prompt's own example has doubled braces; judges copy them
        pytest.param('{{"Sufficient Context To The Given Answer": 1}}', T, 1, id="double-braces"),
        # released: the raw JSON value (bool, string) goes on to the reward arithmetic
        pytest.param('{"sufficient context to the given answer": true}', T, True, id="bool"),
        pytest.param('{"Sufficient Context To The Given Answer": "1"}', T, "1", id="string"),
        # the judge's own <think> draft: released reads the first label (there), paper the last outside it
        pytest.param('<think>{"Sufficient Context To The Given Answer": 1}</think>{"Sufficient Context To The Given Answer": 0}', F, 1, id="think-draft"),
        # the reminder paragraph names the criterion "Sufficient Context": paper accepts it, released misses it (0)
        pytest.param('{"Sufficient Context": 1}', T, 0, id="short-key"),
        # no label: unparseable, never "insufficient" (released: 0 and a counted miss)
        pytest.param("The context is sufficient.", U, 0, id="no-json"),
        # a value that is not 0/1
        pytest.param('{"Sufficient Context To The Given Answer": 0.5}', U, 0.5, id="half"),
    ],
)  # fmt: skip
def test_it_parses_sufficiency_replies(reply: str, paper: Verdict, released: object) -> None:
    assert parse_sufficiency_verdict(reply) is paper
    value = get_result_reference(reply, ParseMissCounter())
    assert value == released and type(value) is type(released)


def test_it_counts_released_parse_misses_across_a_request_and_fails_on_bad_json() -> None:
    counter = ParseMissCounter()
    replies = ["no json", '{"Sufficient Context To The Given Answer": 1}', "still none"]
    assert [get_result_reference(r, counter) for r in replies] == [0, 1, 0]
    assert counter.misses == 2  # the global m, as the server counts it within one request
    assert parse_sufficiency_verdict('{"Sufficient Context To The Given Answer": yes}') is U
    with pytest.raises(json.JSONDecodeError):  # released: HTTP 500, the reward server then fails
        get_result_reference('{"Sufficient Context To The Given Answer": yes}', ParseMissCounter())


@pytest.mark.parametrize(
    ("reply", "paper", "released"),
    [
        # the reply the prompt asks for
        pytest.param("0.7", 0.7, 0.7, id="score"),
        # Qwen3's own <think> block is removed first, by both
        pytest.param("<think>long reasoning</think>\n0.3", 0.3, 0.3, id="judge-think-removed"),
        pytest.param("0", 0.0, 0.0, id="zero"),
        # out of range: unparseable for the paper; released passes it through unclipped
        pytest.param("1.5", U, 1.5, id="above-one"),
        pytest.param("-0.5", U, -0.5, id="negative"),
        # float() accepts "nan"; the paper's parser does not
        pytest.param("nan", U, math.nan, id="nan"),
        # prose: unparseable, released 0 (indistinguishable from a real 0)
        pytest.param("Score: 0.8", U, 0, id="prose"),
        pytest.param("", U, 0, id="empty"),
    ],
)
def test_it_parses_thinking_replies(reply: str, paper: float | Verdict, released: float) -> None:
    assert parse_thinking_score(reply) == paper
    value = thinking_score_reference(reply)
    assert (math.isnan(value) and math.isnan(released)) or value == released


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # the prompt asks for True/False
        pytest.param("True", T, id="true"),
        # surrounding blanks and a full stop are not an answer of their own
        pytest.param(" false.", F, id="false-with-period"),
        # the caption describes the reply as "yes"/"no"
        pytest.param("yes", T, id="yes-as-the-caption-says"),
        # "Not True" is not true
        pytest.param("Not True", U, id="not-true-is-not-true"),
        # no reply is unparseable, never "false"
        pytest.param("", U, id="empty"),
    ],
)
def test_it_parses_the_fig_13_answer_judge(reply: str, expected: Verdict) -> None:
    assert parse_answer_judgement(reply) is expected


@given(st.text())
def test_it_never_raises_on_any_judge_reply(reply: str) -> None:
    assert parse_sufficiency_verdict(reply) in (T, F, U)
    score = parse_thinking_score(reply)
    assert score is U or 0.0 <= score <= 1.0  # type: ignore[operator]
    assert parse_answer_judgement(reply) in (T, F, U)


def test_it_runs_the_released_judge_server_handler() -> None:
    item = {
        "question": "Who?",
        "answer": GOLD,
        "context": "<think>a</think><search>q</search><information>D</information>",
    }
    response = generate_reference(
        [item, item], ['{"Sufficient Context To The Given Answer": 1}', "?"], ["0.4", "x"]
    )
    assert (response.results, response.thinking_results, response.parse_misses) == ([1, 0], [0.4, 0], 1)
    assert response.thinking_prompts[0][1]["content"].startswith(
        "\n        INPUT:\n        ### CONTEXT\n        D\n"
    )
    assert extract_information_and_others_reference("(1)doc</information>") == ("", "(1)doc</information>")
    assert extract_question_reference("<|im_start|>user\nWho?<|im_end|>") == "Who?"
    with pytest.raises(UnboundLocalError):  # released: `content` unbound without a user turn
        extract_question_reference("no chat markers")
