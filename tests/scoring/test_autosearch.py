"""AutoSearch: the turn parser, the paper's reward (Eqs. 1–10, Fig. 4), the released code's variant, the prompts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.formats.autosearch import (
    is_repeat_part,
    is_repeat_query,
    is_valid_answer_part,
    is_valid_search_part,
    parse_autosearch,
    trajectory_prefix,
)
from scoring.judging.autosearch import (
    extract_intermediate_answer,
    intermediate_answer_prompt,
    intermediate_prompts_reference,
)
from scoring.rewards.autosearch import (
    EPSILON,
    RETRIEVAL_STEP_BOUNDS,
    TERMINAL_STEP_BOUNDS,
    answer_f1,
    autosearch_reward,
    early_correct,
    early_correct_ratio,
    efficiency_rewards,
    minimal_sufficient_depth,
    quality_rewards,
    step_validity,
)
from scoring.rewards.autosearch_reference import (
    ReferenceTurn,
    autosearch_reward_reference,
    compute_score_em_reference,
    f32,
)
from scoring.trajectory import StepKind
from scoring.verdicts import MissingVerdict

GOLD = ["James Cameron"]
QUESTION = "Who directed the film that won Best Picture in 1998?"
PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nAnswer the given question. "
    "... If you find no further external knowledge needed, you can directly provide the answer inside <answer> and "
    f"</answer>, without detailed illustrations. For example, <answer> Beijing </answer>. Question: {QUESTION}\n"
    "<|im_end|>\n<|im_start|>assistant\n"
)
INFO = (
    '\n\n<information>Doc 1(Title: "Titanic (1997 film)") Titanic won Best Picture in 1998.</information>\n\n'
)
NOTICE = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n"
)


def search(query: str) -> str:
    return f"<think>look up {query}</think>\n<search> {query} </search>"


def answer(text: str = "James Cameron") -> str:
    return f"<think>done</think>\n<answer> {text} </answer>"


def response(queries: list[str], final: str = "James Cameron") -> str:
    return "".join(search(q) + INFO for q in queries) + answer(final)


# --- parser ---


@pytest.mark.parametrize(
    ("text", "kinds", "error", "error_at"),
    [
        # two searches then an answer: the paper's well-formed trajectory
        pytest.param(response(["Best Picture 1998", "Titanic director"]), "ssn", None, None, id="valid"),
        # answering at once is a one-step trajectory
        pytest.param(answer(), "n", None, None, id="direct-answer"),
        # the chat end token after </answer> is tolerated (paper mode)
        pytest.param(answer() + "<|im_end|>\n", "n", None, None, id="trailing-im-end"),
        # an unclosed <think> in an intermediate turn: reported on turn 1 where </search> breaks it
        pytest.param(
            "<think>a\n<search> q </search>" + INFO + answer(),
            "sn",
            "turn 1: unexpected <search>",
            "<search>",
            id="unclosed-think",
        ),
        # prose between </think> and <search>
        pytest.param(
            "<think>a</think> so <search> q </search>" + INFO + answer(),
            "sn",
            "expected <search> after </think>, found 'so",
            " so",
            id="text-before-search",
        ),
        # the response stops after a search: the last turn must answer
        pytest.param(search("q") + INFO, "s", "final turn 1: expected <answer>", "<search>", id="no-answer"),
        # a turn without an action gets the invalid-action notice; that turn is invalid
        pytest.param("<think>hmm</think> no action" + NOTICE + answer(), "nn", "turn 1", " no", id="notice"),
        # more text after the answer: the answer turn is not the last turn any more
        pytest.param(
            answer() + " more" + answer(), "nn", "turn 1: expected <search>", "<answer>", id="after"
        ),
        # an observation that never closes
        pytest.param(search("q") + "\n\n<information>Doc 1", "s", "turn 1", "<search>", id="unclosed-info"),
        # nothing at all
        pytest.param("", "", "empty response", None, id="empty"),
    ],
)
def test_it_parses_turns_and_locates_the_first_broken_rule(
    text: str, kinds: str, error: str | None, error_at: str | None
) -> None:
    trajectory = parse_autosearch(text)
    assert "".join("s" if s.is_search else "n" for s in trajectory.steps) == kinds
    if error is None:
        assert trajectory.valid, trajectory.error
    else:
        assert trajectory.error is not None
        assert error in trajectory.error.reason
        if error_at is not None:
            assert trajectory.error.position == text.index(error_at) + (
                len(error_at) - len(error_at.lstrip())
            )


def test_it_reads_steps_from_the_response_of_a_prompt_plus_response() -> None:
    body = response(["Best Picture 1998"])
    trajectory = parse_autosearch(PROMPT + body)
    first, last = trajectory.steps
    assert trajectory.valid
    assert trajectory.extras["question"] == QUESTION
    # the prompt's "<answer> Beijing </answer>" is not an answer
    assert trajectory.answers == ("James Cameron",)
    assert (first.kind, first.query, first.reasoning) == (
        StepKind.SEARCH,
        "Best Picture 1998",
        "look up Best Picture 1998",
    )
    assert first.context == 'Doc 1(Title: "Titanic (1997 film)") Titanic won Best Picture in 1998.'
    assert first.raw == search("Best Picture 1998") and first.start == len(PROMPT)
    assert (last.kind, last.query, last.context) == (StepKind.NON_SEARCH, None, None)
    assert trajectory_prefix(trajectory, 0) == search("Best Picture 1998") + INFO
    assert trajectory_prefix(trajectory, 1) == body


TAGS = [
    "<think>",
    "</think>",
    "<search>",
    "</search>",
    "<answer>",
    "</answer>",
    "<information>",
    "</information>",
]
soup = st.lists(
    st.one_of(st.sampled_from([*TAGS, NOTICE, "<|im_end|>", "\n", " ", "q"]), st.text(max_size=5)),
    max_size=30,
).map("".join)
ROLLOUT_ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(st.text(), soup))
def test_it_never_raises_and_each_step_is_a_rollout_turn(text: str) -> None:
    trajectory = parse_autosearch(text)
    assert trajectory.error is None or 0 <= trajectory.error.position <= len(text)
    for step in trajectory.steps:
        assert text[step.start : step.start + len(step.raw)] == step.raw
        action = ROLLOUT_ACTION.search(step.raw)  # the rollout's action parse of the same turn
        assert step.is_search == bool(action and action.group(1) == "search")
        if action and step.is_search:
            assert step.query == action.group(2).strip()


# --- the released checks ---


@pytest.mark.parametrize(
    ("part", "as_search", "as_answer"),
    [
        # whitespace around and between the tags is fine
        pytest.param("<think>a</think>\n<search> q </search>\n", True, False, id="search-turn"),
        # the answer turn passes only the answer check
        pytest.param("<think>a</think><answer>x</answer>", False, True, id="answer-turn"),
        # no tolerance for a trailing chat token (paper-mode parsing allows it)
        pytest.param("<think>a</think><answer>x</answer><|im_end|>", False, False, id="im-end"),
        # search tags inside <think> are plain text to the answer check
        pytest.param(
            "<think>a <search>q</search></think><answer>x</answer>", False, True, id="search-in-think"
        ),
        # exactly one <think> block
        pytest.param("<think>a</think><think>b</think><search>q</search>", False, False, id="two-thinks"),
        # reasoning is mandatory
        pytest.param("<search>q</search>", False, False, id="no-think"),
        # nothing is not a turn
        pytest.param("", False, False, id="empty"),
    ],
)
def test_it_keeps_the_released_turn_checks(part: str, as_search: bool, as_answer: bool) -> None:
    assert (is_valid_search_part(part), is_valid_answer_part(part)) == (as_search, as_answer)


@pytest.mark.parametrize(
    ("current", "history", "released", "paper"),
    [
        # the first turn never repeats
        pytest.param(search("Titanic"), [], False, False, id="first-turn"),
        # same query up to case and punctuation
        pytest.param(search("Best Picture, 1998"), [search("best picture 1998")], True, True, id="same"),
        # a new word moves the cosine to 0.78 < 0.8
        pytest.param(
            search("Best Picture winner 1998"), [search("Best Picture 1998")], False, False, id="new-word"
        ),
        # released: one-character tokens only -> sklearn's empty vocabulary -> repeat; paper: compare strings
        pytest.param(search("x y"), [search("z")], True, False, id="empty-vocabulary"),
        # released: articles only normalize to "" -> repeat
        pytest.param(search("the a an"), [search("Titanic")], True, False, id="articles-only"),
    ],
)
def test_it_detects_repeated_searches(current: str, history: list[str], released: bool, paper: bool) -> None:
    assert is_repeat_part(current, history) is released
    query = current.split("<search>")[1].split("</search>")[0]
    assert is_repeat_query(query, [h.split("<search>")[1].split("</search>")[0] for h in history]) is paper


def test_it_counts_a_turn_without_a_query_as_a_repeat_in_the_released_code() -> None:
    assert is_repeat_part("<think>no query</think>", [search("q")]) is True


# --- paper mode (Eqs. 1–10) ---


@pytest.mark.parametrize(
    ("answers", "golds", "depth"),
    [
        # Eq. 6 takes the first step with an exact match, not a later one
        pytest.param(["Titanic", "James Cameron", "James Cameron"], GOLD, 2, id="second-step"),
        # word order matters for EM: no exact match anywhere means t_c = -1
        pytest.param(["Titanic", "cameron, james"], GOLD, -1, id="never"),
        # the last retrieval step can be t_c (the released code never stops there)
        pytest.param(["Titanic", "james cameron."], GOLD, 2, id="last-step-counts"),
        # any gold counts (the released code judges against the first gold only)
        pytest.param(["Cameron"], ["James Cameron", "Cameron"], 1, id="any-gold"),
        # a direct answer has no retrieval step to stop at
        pytest.param([], GOLD, -1, id="no-retrieval"),
    ],
)
def test_it_finds_the_minimal_sufficient_depth(answers: list[str], golds: list[str], depth: int) -> None:
    assert minimal_sufficient_depth(answers, golds) == depth


@pytest.mark.parametrize(
    ("n", "t_c", "expected"),
    [
        # Eq. 7 case 1: never answered, every step gets the small under-search reward
        pytest.param(3, -1, [0.025, 0.025, 0.025], id="under-search"),
        # stopped at the optimum: 0.4/2 - 0.05 on every step, no penalty
        pytest.param(2, 2, [0.15, 0.15], id="stopped-at-optimum"),
        # cases 2 and 3: the shallower t_c pays more, each step after it costs 0.1
        pytest.param(4, 1, [0.35, -0.1, -0.1, -0.1], id="over-search"),
        # nothing to reward
        pytest.param(0, -1, [], id="no-retrieval"),
    ],
)
def test_it_rewards_efficiency_per_eq_7(n: int, t_c: int, expected: list[float]) -> None:
    assert efficiency_rewards(n, t_c) == pytest.approx(expected, abs=1e-7)


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        # Eq. 9: each step is paid for what it adds to the best F1 so far
        pytest.param(["Titanic", "Cameron", "James Cameron"], [0.0, 2 / 3, 1 / 3], id="gains"),
        # a worse answer than before is negative: Eq. 9 as written (the released code clamps at 0)
        pytest.param(["James Cameron", "Cameron"], [1.0, -1 / 3], id="worse-is-negative"),
        # articles normalize to no tokens: F1 0 (not 0/0)
        pytest.param(["the", "a"], [0.0, 0.0], id="empty-normalized"),
    ],
)
def test_it_rewards_search_quality_as_f1_gain(answers: list[str], expected: list[float]) -> None:
    assert quality_rewards(answers, GOLD) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("prediction", "golds", "f1"),
    [
        # IN = 1, PN = 1, RN = 2: 2·1 / (1 + 2)
        pytest.param("Cameron", GOLD, 2 / 3, id="partial"),
        # no overlap is 0 (Eq. 8 has no FlashRAG yes/no special case)
        pytest.param("yes", ["no"], 0.0, id="yes-no"),
        # the best gold wins: 2·2 / (3 + 2) against "James Cameron" beats 2·1 / (3 + 1)
        pytest.param("James Francis Cameron", ["Cameron", "James Cameron"], 0.8, id="best-gold"),
    ],
)
def test_it_computes_eq_8_f1(prediction: str, golds: list[str], f1: float) -> None:
    assert answer_f1(prediction, golds) == pytest.approx(f1)


def test_it_scores_a_worked_example_per_eq_10() -> None:
    trajectory = parse_autosearch(response(["Best Picture 1998", "Titanic director"]))
    reward = autosearch_reward(trajectory, GOLD, ["Titanic", "James Cameron"])
    effective = 0.4 / (2 + EPSILON) - 0.05  # t_c = 2
    assert reward.step_rewards == pytest.approx([effective, effective + 1.0, 0.1 + 1.0])
    assert reward.total == pytest.approx(sum(reward.step_rewards))
    assert dict(reward.components) == pytest.approx(
        {"format": 0.1, "result": 1.0, "efficiency": 2 * effective, "quality": 1.0, "optimal_depth": 2.0}
    )


@pytest.mark.parametrize(
    ("text", "validity", "format_total"),
    [
        # every step valid: 0 + 0 + 0.1
        pytest.param(response(["a b", "c d"]), (True, True, True), 0.1, id="all-valid"),
        # Eq. 1: repeating a search is invalid even when well-formed (-0.05)
        pytest.param(response(["Titanic film", "titanic FILM"]), (True, False, True), 0.05, id="repeat"),
        # a final answer without <think> is an invalid terminal step (-0.5)
        pytest.param(search("q") + INFO + "<answer>x</answer>", (True, False), -0.5, id="bad-final"),
        # an empty response is scored as a lone invalid terminal step
        pytest.param("", (), -0.5, id="empty"),
    ],
)
def test_it_scores_format_per_eq_1(text: str, validity: tuple[bool, ...], format_total: float) -> None:
    trajectory = parse_autosearch(text)
    assert step_validity(trajectory) == validity
    reward = autosearch_reward(trajectory, GOLD, ["x"] * max(len(trajectory.steps) - 1, 0))
    assert reward.components["format"] == pytest.approx(format_total)


def test_it_refuses_a_missing_intermediate_answer_and_misaligned_inputs() -> None:
    trajectory = parse_autosearch(response(["a b", "c d"]))
    with pytest.raises(MissingVerdict, match="retrieval step 2"):
        autosearch_reward(trajectory, GOLD, ["x", None])
    with pytest.raises(ValueError, match="1 intermediate answers for 2"):
        autosearch_reward(trajectory, GOLD, ["x"])


def test_its_reward_peaks_at_the_minimal_sufficient_depth_as_in_fig_4() -> None:
    # Depth d = number of searches; the intermediate answer is right from the 2nd search on, and so is the final
    # answer (at depth 1 the agent has not found it yet).
    paper_efficiency, paper_total, released_total = [], [], []
    for depth in range(1, 5):
        intermediate = ["Titanic", *(["James Cameron"] * (depth - 1))]
        final = "James Cameron" if depth >= 2 else "Steven Spielberg"
        queries = [f"hop {hop} question part{hop}" for hop in range(depth)]
        reward = autosearch_reward(parse_autosearch(response(queries, final)), GOLD, intermediate)
        paper_efficiency.append(reward.components["efficiency"])
        paper_total.append(reward.total)
        turns = [ReferenceTurn(search(q), INFO) for q in queries] + [ReferenceTurn(answer(final))]
        replies = [f"<answer>{a}</answer>" for a in intermediate]
        released_total.append(autosearch_reward_reference(PROMPT, turns, GOLD, replies).reward_sum)
    for curve in (paper_efficiency, paper_total, released_total):
        assert curve.index(max(curve)) == 1  # the peak is at depth 2
        assert curve[1] > curve[2] > curve[3]  # and every extra search costs
    assert paper_efficiency == pytest.approx([0.025, 0.3, 0.2, 0.1], abs=1e-7)


finals = st.sampled_from(["James Cameron", "Cameron", "x"])
turn = st.tuples(st.sampled_from(["Titanic", "titanic film", "x y", "the", "James Cameron"]), st.booleans())


@settings(max_examples=300, deadline=None)
@given(turns=st.lists(turn, max_size=5), final=finals, final_ok=st.booleans(), answers=st.data())
def test_its_step_rewards_stay_within_the_documented_bounds(
    turns: list[tuple[str, bool]], final: str, final_ok: bool, answers: st.DataObject
) -> None:
    parts = [(search(q) if ok else f"<think>a</think>{q}") + INFO for q, ok in turns]
    text = "".join(parts) + (answer(final) if final_ok else f"<answer>{final}</answer>")
    trajectory = parse_autosearch(text)
    n = len(trajectory.steps) - 1
    intermediate = answers.draw(st.lists(finals, min_size=n, max_size=n))
    reward = autosearch_reward(trajectory, GOLD, intermediate)
    *retrieval, terminal = reward.step_rewards
    assert all(RETRIEVAL_STEP_BOUNDS[0] <= r < RETRIEVAL_STEP_BOUNDS[1] for r in retrieval)
    assert TERMINAL_STEP_BOUNDS[0] <= terminal <= TERMINAL_STEP_BOUNDS[1]
    assert reward.total == pytest.approx(sum(reward.step_rewards))


# --- the released RewardManager ---


def test_it_overwrites_every_turn_after_an_early_correct_answer() -> None:
    turns = [ReferenceTurn(search("a b"), INFO), ReferenceTurn(search("c d"), INFO), ReferenceTurn(answer())]
    result = autosearch_reward_reference(PROMPT, turns, GOLD, ["<answer>James Cameron</answer>", "x"])
    # turn 0: format 0.025 + F1 gain 1 + 0.5·(0.4/1 − 0.05); later turns, the right final answer included: −0.05
    assert result.per_turn_rewards == (f32(f32(f32(0.025) + 1.0) + f32(0.175)), f32(-0.05), f32(-0.05))
    assert (result.first_correct_turn, result.early_correct, result.early_correct_ratio) == (0, 1.0, 0.5)


def test_it_never_stops_at_the_last_observed_turn() -> None:
    turns = [ReferenceTurn(search("a b"), INFO), ReferenceTurn(answer())]
    result = autosearch_reward_reference(PROMPT, turns, GOLD, ["<answer>James Cameron</answer>"])
    assert result.first_correct_turn is None and result.early_correct == 0.0
    assert result.per_turn_rewards == pytest.approx([0.025 + 1 + 0.175, 0.1 + 1 + 0.175], rel=1e-6)


def test_it_puts_the_answer_score_on_the_last_token_even_after_an_observation() -> None:
    # One turn, a search followed by documents, and the prompt's "Beijing" example becomes the final answer.
    turns = [ReferenceTurn(search("capital"), INFO)]
    result = autosearch_reward_reference(PROMPT, turns, ["Beijing"], ["<answer>x</answer>"])
    assert result.per_turn_rewards == (f32(-0.5 + 0.2),)  # invalid final turn, then the one-turn bonus
    assert result.outside_turn_ends == {len(search("capital")) + len(INFO) - 1: 1.0}
    assert result.reward.total == pytest.approx(0.7)


def test_it_reproduces_the_released_crashes() -> None:
    bare_prompt = f"<|im_start|>user\nQuestion: {QUESTION}\n<|im_end|>\n<|im_start|>assistant\n"
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'lower'"):
        compute_score_em_reference(bare_prompt + "<think>a</think>", GOLD, ["<think>a</think>"])
    with pytest.raises(IndexError):
        compute_score_em_reference(PROMPT + answer(), GOLD, [])


# --- prompts and metrics ---


def test_it_builds_the_released_self_answering_prompts() -> None:
    turns = [(search("q1"), INFO), (search("q2"), NOTICE), (answer(), "")]
    first, second = intermediate_prompts_reference(PROMPT, turns)
    assert first == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nAnswer the given question "
        "according to search trajectories, which consists of multiple reasoning, search calls, and retrieved "
        "informations.\nImportant instructions:\n1) You must conduct reasoning inside <think> and </think> first.\n"
        "2) After reasoning, output the final answer wrapped in <answer> and </answer>.\nFor example: "
        "<think>Reasoning</think><answer>Jaden Smith</answer>\nSearch trajectory: Question: "
        f"{QUESTION}\n\nBelow are your previous reasoning, search calls, and retrieved informations:\n"
        f"{search('q1')}{INFO}\n\n.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert f"{search('q2')}{NOTICE}\n\n." in second  # the invalid-action notice also triggers self-answering


def test_it_fills_the_papers_prompt_1() -> None:
    prompt = intermediate_answer_prompt(QUESTION, search("q") + INFO)
    assert prompt.startswith("Answer the given question according to search trajectories")
    assert f"Search trajectory: Question: {QUESTION}. Below are your previous reasoning" in prompt
    assert prompt.endswith(f"retrieved information: {search('q')}{INFO}.")


@pytest.mark.parametrize(
    ("reply", "extracted"),
    [
        # the first answer block, stripped
        pytest.param(
            "<think>x</think><answer> Paris </answer><answer>Lyon</answer>", "Paris", id="first-answer"
        ),
        # special tokens kept
        pytest.param("  Paris<|im_end|>\n", "Paris<|im_end|>", id="no-tags"),
        # newlines inside the block survive
        pytest.param("<answer>\nmulti\nline\n</answer>", "multi\nline", id="multi-line"),
        # an unclosed tag is no block: the whole reply is the answer
        pytest.param("<answer>unclosed", "<answer>unclosed", id="unclosed"),
    ],
)
def test_it_extracts_intermediate_answers(reply: str, extracted: str) -> None:
    assert extract_intermediate_answer(reply) == extracted


@pytest.mark.parametrize(
    ("n_info", "t_c", "flag", "ratio"),
    [
        # one of two searches was unnecessary
        pytest.param(2, 0, True, 0.5, id="first-of-two"),
        # right after the second of four searches: two were unnecessary
        pytest.param(4, 1, True, 0.5, id="second-of-four"),
        # never right before the last search: no over-search
        pytest.param(3, None, False, 0.0, id="never-early"),
    ],
)
def test_it_computes_the_early_correct_metrics(
    n_info: int, t_c: int | None, flag: bool, ratio: float
) -> None:
    assert (early_correct(t_c), early_correct_ratio(n_info, t_c)) == (flag, ratio)
