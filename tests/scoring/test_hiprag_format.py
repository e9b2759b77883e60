"""HiPRAG's format: the parser, the paper's checker F(T) (Algorithms 2–3) and the released checkers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.formats.hiprag import parse_hiprag
from scoring.formats.hiprag_checkers import (
    check_format_optimized_reference,
    check_format_regex_reference,
    steps_reference,
)
from scoring.judging.hiprag import initial_prompt
from scoring.trajectory import StepKind

# HiPRAG Fig. 3 (b), the paper's worked example, written out in the parsable format as the figure shows it.
FIG3 = """<think>
<step>
    <reasoning>This is a multi-part question. First, I need to identify the latest PlayStation console. Then, I need to find out which company makes its graphics cards. I suspect it's either Sony itself, NVIDIA, or AMD, but I need to be certain. I will start by identifying the latest PlayStation model.</reasoning>
    <search>latest playstation console model</search>
    <context>The latest PlayStation console is the PlayStation 5 (PS5).</context>
    <conclusion>PlayStation 5 (PS5)</conclusion>
</step>
<step>
    <reasoning>Now that I know the console is the PS5, I need to find the manufacturer of its graphics processing unit (GPU).</reasoning>
    <conclusion>AMD</conclusion>
</step>
<step>
    <reasoning>I have identified the company as AMD. Now I need to find its current CEO.</reasoning>
    <search>current CEO of AMD</search>
    <context>The current President and CEO of AMD is Dr. Lisa Su.</context>
    <conclusion>Dr. Lisa Su</conclusion>
</step>
<step>
    <reasoning>I have the company (AMD) and the CEO (Lisa Su). Now I need to find the stock price. Today is Saturday, July 19, 2025, so I need the closing price from Friday, July 18, 2025.</reasoning>
    <search>AMD stock price closing July 18 2025</search>
    <context>AMD (Advanced Micro Devices, Inc.) closed at $175.40 on Friday, July 18, 2025.</context>
    <conclusion>$175.40</conclusion>
</step>
</think>
<answer>Dr. Lisa Su and $175.40.</answer>"""

S = "<step><reasoning>r</reasoning><search>q</search><context>c</context><conclusion>o</conclusion></step>"
N = "<step><reasoning>r</reasoning><conclusion>o</conclusion></step>"


def wrap(steps: str, answer: str = "<answer>A</answer>") -> str:
    return f"<think>{steps}</think>{answer}"


def test_it_parses_the_papers_figure_3_trajectory() -> None:
    trajectory = parse_hiprag(FIG3)
    assert trajectory.valid, trajectory.error
    assert [step.kind for step in trajectory.steps] == [
        StepKind.SEARCH,
        StepKind.NON_SEARCH,
        StepKind.SEARCH,
        StepKind.SEARCH,
    ]
    assert [step.query for step in trajectory.steps] == [
        "latest playstation console model",
        None,
        "current CEO of AMD",
        "AMD stock price closing July 18 2025",
    ]
    assert [step.conclusion for step in trajectory.steps] == [
        "PlayStation 5 (PS5)",
        "AMD",
        "Dr. Lisa Su",
        "$175.40",
    ]
    assert trajectory.steps[1].context is None
    assert trajectory.answer == "Dr. Lisa Su and $175.40."
    for step in trajectory.steps:  # raw is the block's inner text, start its offset
        assert FIG3[step.start - len("<step>") : step.start] == "<step>"
        assert FIG3[step.start : step.start + len(step.raw)] == step.raw


def test_it_reads_the_response_after_the_prompt_and_keeps_the_question() -> None:
    response = "\nThe capital.</reasoning><conclusion>Paris</conclusion></step></think><answer>Paris</answer>"
    trajectory = parse_hiprag(initial_prompt("capital of France") + response)
    assert trajectory.valid, trajectory.error
    assert [step.conclusion for step in trajectory.steps] == ["Paris"]
    assert trajectory.answers == ("Paris",)  # the prompt's own <answer> example is not an answer
    assert trajectory.extras == {"question": "capital of France?"}


@pytest.mark.parametrize(
    ("text", "reason", "position"),
    [
        # the brief's example: a step without its conclusion, located right after </reasoning>
        pytest.param(wrap(N + "<step><reasoning>r</reasoning></step>"), "step 2: <conclusion> missing after <reasoning>", 100, id="no-conclusion"),
        pytest.param("no tags at all", "no <think> block", 0, id="no-think"),
        # Algorithm 2 line 2: </think> must occur exactly once after the (last) <think>
        pytest.param(f"<think>{N}<answer>A</answer>", "<think> is never closed (no </think> after it)", 0, id="think-unclosed"),
        pytest.param(wrap(N) + "</think>", "more than one </think> after the last <think>", 96, id="two-think-closes"),
        # Algorithm 2 line 7: <answer> right after </think>
        pytest.param(wrap(N, ""), "no <answer> after </think>", 78, id="no-answer"),
        pytest.param(wrap(N, "so <answer>A</answer>"), "expected <answer> right after </think>", 78, id="text-before-answer"),
        # Algorithm 2 lines 8–11: one non-empty answer, nothing after it
        pytest.param(wrap(N, "<answer>A"), "<answer> is never closed", 78, id="answer-unclosed"),
        pytest.param(wrap(N, "<answer>A<answer>B</answer>"), "more than one <answer> after </think>", 87, id="nested-answer"),
        pytest.param(wrap(N, "<answer>A</answer><answer>B</answer>"), "more than one <answer> after </think>", 96, id="two-answers"),
        pytest.param(wrap(N, "<answer>A</answer></answer>"), "more than one </answer> after </think>", 96, id="two-answer-closes"),
        pytest.param(wrap(N, "<answer>  </answer>"), "empty <answer>", 86, id="empty-answer"),
        pytest.param(wrap(N, "<answer>A</answer><|im_end|>"), "text after </answer>", 96, id="trailing-text"),
        # Algorithm 2 lines 14–27: only <step> blocks inside <think>, at least one
        pytest.param(wrap(""), "no <step> block inside <think>", 7, id="no-steps"),
        pytest.param(wrap("hmm " + N), "text outside the <step> blocks inside <think>", 7, id="text-before-step"),
        pytest.param(wrap(N + " so " + N), "text outside the <step> blocks inside <think>", 71, id="text-between-steps"),
        pytest.param(wrap("<step><reasoning>r</reasoning>"), "step 1: <step> is never closed", 7, id="step-unclosed"),
        # Algorithm 3 lines 2–8: one <reasoning> first, one <conclusion> after it, nothing after the conclusion
        pytest.param(wrap("<step><conclusion>o</conclusion></step>"), "step 1: <reasoning> missing after <step>", 13, id="no-reasoning"),
        pytest.param(wrap("<step><reasoning>r<reasoning></reasoning><conclusion>o</conclusion></step>"), "step 1: more than one <reasoning>", 25, id="two-reasonings"),
        pytest.param(wrap("<step><reasoning>r<conclusion>o</conclusion></step>"), "step 1: <reasoning> is never closed", 13, id="reasoning-unclosed"),
        pytest.param(wrap("<step>x<reasoning>r</reasoning><conclusion>o</conclusion></step>"), "step 1: text before <reasoning> (a step must begin with it)", 13, id="text-before-reasoning"),
        pytest.param(wrap("<step><reasoning>r<conclusion>o</conclusion></reasoning></step>"), "step 1: <conclusion> must come after </reasoning>", 25, id="conclusion-in-reasoning"),
        pytest.param(wrap("<step><reasoning>r</reasoning><conclusion>o</conclusion>!</step>"), "step 1: text after </conclusion> (a step must end with it)", 63, id="text-after-conclusion"),
        pytest.param(wrap("<step><reasoning>r</reasoning><conclusion>o</conclusion><conclusion>p</conclusion></step>"), "step 1: more than one <conclusion>", 63, id="two-conclusions"),
        # Algorithm 3 line 21: nothing but whitespace between </reasoning> and <conclusion> (an HTML tag counts)
        pytest.param(wrap("<step><reasoning>r</reasoning><b>x</b><conclusion>o</conclusion></step>"), "step 1: text between </reasoning> and <conclusion>", 37, id="stray-tag"),
        # Algorithm 3 lines 10–17: <search> or <context> makes it a search step with exactly one of each, in order
        pytest.param(wrap("<step><reasoning>r</reasoning><search>q</search><conclusion>o</conclusion></step>"), "step 1: <context> missing after </search>", 55, id="search-no-context"),
        pytest.param(wrap("<step><reasoning>r</reasoning><context>c</context><conclusion>o</conclusion></step>"), "step 1: <search> missing after </reasoning>", 37, id="context-no-search"),
        pytest.param(wrap("<step><reasoning>r</reasoning><context>c</context><search>q</search><conclusion>o</conclusion></step>"), "step 1: <context> must come after </search>", 37, id="context-first"),
        pytest.param(wrap("<step><reasoning>I may use <search> later</reasoning><conclusion>o</conclusion></step>"), "step 1: <search> is never closed", 34, id="search-word-in-reasoning"),
        pytest.param(wrap("<step><reasoning>r</reasoning>x<search>q</search><context>c</context><conclusion>o</conclusion></step>"), "step 1: text between </reasoning> and <search>", 37, id="text-before-search"),
        pytest.param(wrap("<step><reasoning>r</reasoning><search>q</search><search>q</search><context>c</context><conclusion>o</conclusion></step>"), "step 1: more than one <search>", 55, id="two-searches"),
    ],
)  # fmt: skip
def test_it_names_the_broken_rule_and_where(text: str, reason: str, position: int) -> None:
    trajectory = parse_hiprag(text)
    assert trajectory.error is not None
    assert (trajectory.error.reason, trajectory.error.position) == (reason, position)


@pytest.mark.parametrize(
    ("text", "paper", "training", "reward_py", "regex"),
    [
        pytest.param(wrap(S + N), True, True, True, True, id="valid"),
        # Algorithm 3 asks for no non-empty query/context; the released checkers do
        pytest.param(wrap(S.replace(">q<", "> <")), True, False, False, False, id="blank-query"),
        # Algorithm 2 line 10 rejects an empty answer; none of the released checkers do
        pytest.param(wrap(N, "<answer></answer>"), False, True, True, True, id="empty-answer"),
        # only reward.py's copy forgets the trailing-text check
        pytest.param(wrap(N, "<answer>A</answer> done"), False, False, True, False, id="trailing-text"),
        # the released checkers tolerate text without both < and > between steps and inside steps
        pytest.param(wrap(N + " and then " + N), False, True, True, True, id="text-between-steps"),
        pytest.param(wrap("<step>Step one: <reasoning>r</reasoning><conclusion>o</conclusion></step>"), False, True, True, True, id="text-in-step"),
        # a <search> written inside <reasoning>: the optimized checker never looks there, the regex one does
        pytest.param(wrap("<step><reasoning>use <search>x</search></reasoning><conclusion>o</conclusion></step>"), False, True, True, False, id="search-in-reasoning"),
        # text before the LAST <think> is ignored by all four (it cannot be told apart from a prompt)
        pytest.param("intro <think>x</think> " + wrap(N), True, True, True, True, id="prefix"),
    ],
)  # fmt: skip
def test_it_keeps_the_paper_and_the_released_checkers_apart(
    text: str, paper: bool, training: bool, reward_py: bool, regex: bool
) -> None:
    assert parse_hiprag(text).valid is paper
    assert check_format_optimized_reference(text, reject_trailing_text=True) is training
    assert check_format_optimized_reference(text, reject_trailing_text=False) is reward_py
    assert check_format_regex_reference(text) is regex


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(wrap(S + N), (["<reasoning>r</reasoning><search>q</search><context>c</context><conclusion>o</conclusion>", "<reasoning>r</reasoning><conclusion>o</conclusion>"], [7, 108]), id="two-steps"),
        # no </think> after the last <think>: nothing at all
        pytest.param("<think>" + N, ([], []), id="unclosed-think"),
        # the scan stops at a <step> without </step>
        pytest.param(wrap(N + "<step>x"), (["<reasoning>r</reasoning><conclusion>o</conclusion>"], [7]), id="unclosed-step"),
        # the loop bound is checked before each search only: one <step> after </think> is still taken
        pytest.param(wrap(N + " ", "<answer><step>x</step></answer>"), (["<reasoning>r</reasoning><conclusion>o</conclusion>", "x"], [7, 87]), id="step-in-answer"),
    ],
)  # fmt: skip
def test_it_splits_steps_as_the_released_code(text: str, expected: tuple[list[str], list[int]]) -> None:
    assert steps_reference(text) == expected


def _algorithms_2_and_3(y: str) -> bool:
    """HiPRAG Algorithms 2–3 transcribed line by line (tag offsets for SPANBETWEEN), from the last <think>."""
    at = y.rfind("<think>")
    if at == -1:
        return False
    y = y[at:]
    if y.count("<think>") != 1 or y.count("</think>") != 1:
        return False
    close = y.find("</think>")
    t, post = y[7:close], y[close + 8 :]
    if (
        not post.lstrip().startswith("<answer>")
        or post.count("<answer>") != 1
        or post.count("</answer>") != 1
    ):
        return False
    a_open, a_close = post.find("<answer>"), post.find("</answer>")
    if a_close < a_open or not post[a_open + 8 : a_close].strip() or post[a_close + 9 :].strip():
        return False
    p = n = 0
    while True:
        j = t.find("<step>", p)
        if j == -1:
            return not t[p:].strip() and n >= 1
        k = t.find("</step>", j)
        if t[p:j].strip() or k == -1 or not _validate_step(t[j + 6 : k]):
            return False
        p, n = k + 7, n + 1


def _span(s: str, name: str) -> tuple[int, int] | None:
    if s.count(f"<{name}>") != 1 or s.count(f"</{name}>") != 1:
        return None
    o, c = s.find(f"<{name}>"), s.find(f"</{name}>")
    return (o, c) if o < c else None


def _validate_step(s: str) -> bool:
    s = s.strip()
    r, c = _span(s, "reasoning"), _span(s, "conclusion")
    if r is None or c is None or s[: r[0]].strip() or c[0] < r[1] or s[c[1] + 13 :].strip():
        return False
    if "<search>" in s or "<context>" in s:
        q, x = _span(s, "search"), _span(s, "context")
        if q is None or x is None or not r[1] < q[0] < q[1] < x[0] < x[1] < c[0]:
            return False
        return not (s[r[1] + 12 : q[0]].strip() or s[q[1] + 9 : x[0]].strip() or s[x[1] + 10 : c[0]].strip())
    return not s[r[1] + 12 : c[0]].strip()


PIECES = ["<think>", "</think>", "<step>", "</step>", "<reasoning>", "</reasoning>", "<search>", "</search>",
          "<context>", "</context>", "<conclusion>", "</conclusion>", "<answer>", "</answer>", " ", "\n", "x", "<", ">"]  # fmt: skip
# Mostly-valid trajectories with one piece dropped, doubled or moved find the checker's corner cases fastest.
near_valid = (
    st.lists(st.sampled_from([S, N, " ", "\n"]), min_size=1, max_size=4)
    .flatmap(
        lambda steps: st.tuples(
            st.just(wrap("".join(steps))), st.integers(0, 200), st.sampled_from([*PIECES, ""])
        )
    )
    .map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :])
)
tag_soup = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=600, deadline=None)
@given(text=st.one_of(near_valid, tag_soup, st.text()))
def test_it_agrees_with_a_literal_transcription_of_algorithms_2_and_3(text: str) -> None:
    trajectory = parse_hiprag(text)  # never raises, and locates every error inside the text
    assert trajectory.valid is _algorithms_2_and_3(text)
    if trajectory.error is not None:
        assert 0 <= trajectory.error.position <= len(text)
    for step in trajectory.steps:
        assert text[step.start : step.start + len(step.raw)] == step.raw
        assert (step.kind is StepKind.SEARCH) == ("<search>" in step.raw)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(near_valid, tag_soup))
def test_the_released_checkers_never_raise(text: str) -> None:
    assert isinstance(check_format_optimized_reference(text), bool)
    assert isinstance(check_format_regex_reference(text), bool)
    contents, starts = steps_reference(text)
    assert len(contents) == len(starts)
