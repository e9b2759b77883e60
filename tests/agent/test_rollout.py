"""Each method's rollout loop with a scripted policy (deterministic replies): formats, budgets, observations."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from agent.rollout import PAPER_CONFIGS, Question, Rollout, RolloutConfig, completion_tokens, run_rollouts
from agent.rollout_methods import METHODS, tool_call_query
from scoring.formats import parse
from scoring.observations import SEARCHR1_INVALID_ACTION
from tests.agent.conftest import KeywordSearcher, ScriptedBackend

QUESTION = Question("q1", "What is the capital of France", ("Paris",), "demo")


def response(text: str) -> str:
    """The response so far: what follows the last assistant marker of prompt+response."""
    return text.split("<|im_start|>assistant\n")[-1]


def search_r1_policy(text: str) -> str:
    if "<information>" not in response(text):
        return "<think> I need the capital. </think>\n<search> capital of France </search> and more"
    return "<think> It is Paris. </think>\n<answer> Paris </answer> trailing"


def hiprag_policy(text: str) -> str:
    r = response(text)
    if "<context>" not in r:
        return " I should look it up.</reasoning>\n    <search>capital of France</search> extra"
    if r.endswith("<conclusion>"):
        return "Paris is the capital of France.</conclusion>\n</step> never reached"
    return "\n</think>\n<answer>Paris</answer>"


def search_p1_policy(text: str) -> str:
    if "<tool_response>" not in response(text):
        return " 1. Find the capital of France.</reasoning>\n<tool_call>capital of France</tool_call>"
    return "\n<reasoning>The documents say Paris.</reasoning>\n<answer>Paris</answer>"


def tiresrag_policy(text: str) -> str:
    r = response(text)
    if "<information>" not in r:
        return " I need to search.</think>\n<search> capital of France </search>"
    if "<answer>" not in r:
        return "\n<think> Paris it is. </think>\n<answer> Paris </answer>"
    return ""  # declines to reflect (EOS)


POLICIES: dict[str, Callable[[str], str]] = {
    "search_r1": search_r1_policy,
    "autosearch": search_r1_policy,
    "hiprag": hiprag_policy,
    "search_p1": search_p1_policy,
    "tiresrag": tiresrag_policy,
}


def roll(
    method: str,
    policy: Callable[[str], str],
    searcher: KeywordSearcher,
    config: RolloutConfig | None = None,
    questions: list[Question] | None = None,
) -> tuple[list[Rollout], ScriptedBackend]:
    backend = ScriptedBackend(policy)
    loop = METHODS[method]()
    rollouts = asyncio.run(
        run_rollouts(backend, searcher, loop, questions or [QUESTION], config or PAPER_CONFIGS[method])
    )
    return rollouts, backend


@pytest.mark.parametrize("method", sorted(METHODS))
def test_it_writes_a_valid_trajectory_of_each_format(method: str, searcher: KeywordSearcher) -> None:
    [rollout], _ = roll(method, POLICIES[method], searcher, PAPER_CONFIGS[method])
    trajectory = parse(rollout.format, rollout.text)
    assert trajectory.valid, (trajectory.error, rollout.text)
    assert trajectory.answer == "Paris"
    assert rollout.finished and rollout.end == "answer"
    assert rollout.n_searches == trajectory.n_searches == 1
    assert rollout.queries == ["capital of France"]
    env = "".join(s.text for s in rollout.segments if s.source == "env")
    assert "Paris is the capital and largest city of France." in env  # the retrieved passage, top-1
    assert all(s.text for s in rollout.segments)
    assert rollout.prompt_tokens > 0 and rollout.completion_tokens > 0


@pytest.mark.parametrize(
    ("method", "prefix"),
    [
        ("hiprag", "\n<think>\n<step>\n    <reasoning>"),  # HiPRAG's forced prefix is the environment's
        ("search_p1", "<reasoning>"),  # Algorithm 2 line 1 prefills the response
    ],
)
def test_it_marks_forced_prefixes_as_environment_text(
    method: str, prefix: str, searcher: KeywordSearcher
) -> None:
    [rollout], _ = roll(method, POLICIES[method], searcher)
    assert rollout.segments[0].source == "env" and rollout.segments[0].text == prefix


def test_it_ends_searchr1_turns_at_the_first_boundary_and_keeps_no_trailing_text(
    searcher: KeywordSearcher,
) -> None:
    [rollout], _ = roll("search_r1", search_r1_policy, searcher)
    model = [s.text for s in rollout.segments if s.source == "model"]
    assert model[0].endswith("</search>") and model[1].endswith("</answer>")
    assert "\n\n<information>Doc 1(Title: Paris)" in rollout.text


def test_it_answers_an_invalid_searchr1_turn_and_stops_after_the_final_turn(
    searcher: KeywordSearcher,
) -> None:
    [rollout], backend = roll(
        "search_r1", lambda _: "<think> hmm </think>", searcher, RolloutConfig(max_turns=2)
    )
    assert len(backend.batches) == 3  # max_turns turns + the final one
    assert rollout.text.count(SEARCHR1_INVALID_ACTION.strip()) == 2
    assert (rollout.finished, rollout.end) == (False, "budget:turns")


def test_a_turn_gets_only_what_the_rollout_token_budget_leaves_and_the_rollout_ends_when_it_is_spent(
    searcher: KeywordSearcher,
) -> None:
    def search_then_ramble(text: str) -> str:
        return (
            "word " * 50
            if "<information>" in response(text)
            else "<think> more </think><search> Paris </search>"
        )

    config = RolloutConfig(max_turns=8, max_new_tokens=20, max_rollout_tokens=55)
    [rollout], backend = roll("search_r1", search_then_ramble, searcher, config)
    assert backend.caps[0] == 20  # the turn budget, while the rollout budget leaves more
    assert min(backend.caps) < 20  # then only what is left of the 55
    assert (rollout.finished, rollout.end) == (False, "budget:rollout_tokens")
    # The model's tokens stay inside the budget; only the observation of the last search may overrun it.
    env = [len(s.text.split(" ")) for s in rollout.segments if s.source == "env"]
    assert rollout.completion_tokens + sum(env) - env[-1] <= 55


def test_a_turn_cut_by_its_token_budget_is_counted_and_a_final_answer_cut_ends_with_that_reason(
    searcher: KeywordSearcher,
) -> None:
    rambling = lambda _: "word " * 50  # noqa: E731  # never closes a tag
    [rollout], _ = roll("hiprag", rambling, searcher, RolloutConfig(max_turns=2, max_new_tokens=10))
    assert rollout.cut_turns >= 1
    assert (rollout.finished, rollout.end) == (False, "budget:turn_tokens")


def test_it_does_not_execute_a_search_in_the_final_turn(searcher: KeywordSearcher) -> None:
    always_search = lambda _: "<think> more </think><search> Paris </search>"  # noqa: E731
    [rollout], _ = roll("search_r1", always_search, searcher, RolloutConfig(max_turns=2))
    assert rollout.n_searches == 2 and rollout.end == "budget:turns"


def test_it_closes_hiprag_after_the_step_budget(searcher: KeywordSearcher) -> None:
    def policy(text: str) -> str:
        r = response(text)
        if r.endswith("<conclusion>"):
            return "found.</conclusion>"
        if r.endswith("<answer>"):
            return "Paris</answer>"
        if r.endswith("</step>"):
            return "\n<step>\n    <reasoning>again</reasoning>\n    <search>Eiffel Tower</search>"
        return " first</reasoning>\n    <search>capital of France</search>"

    [rollout], _ = roll("hiprag", policy, searcher, RolloutConfig(max_turns=2))
    trajectory = parse("hiprag", rollout.text)
    assert trajectory.valid, trajectory.error
    assert len(trajectory.steps) == 2 and trajectory.answer == "Paris"
    assert [s.text for s in rollout.segments[-3:-1]] == ["\n</step>", "\n</think>\n<answer>"]
    assert rollout.segments[-1].source == "model"


def test_it_can_force_the_next_hiprag_step_as_algorithm_1_line_16_does(searcher: KeywordSearcher) -> None:
    [rollout], _ = roll("hiprag", hiprag_policy, searcher, RolloutConfig(max_turns=3, force_next_step=True))
    assert "\n<step>\n    <reasoning>" in [s.text for s in rollout.segments if s.source == "env"]


def test_it_forces_the_searchp1_answer_after_the_action_budget(searcher: KeywordSearcher) -> None:
    def policy(text: str) -> str:
        return (
            "Paris</answer>"
            if response(text).endswith("<answer>")
            else " plan</reasoning><tool_call>x</tool_call>"
        )

    [rollout], backend = roll("search_p1", policy, searcher, RolloutConfig(max_turns=1))
    assert rollout.n_searches == 1 and len(backend.batches) == 2
    assert rollout.text.endswith("</tool_response>\n<answer>Paris</answer>")


@pytest.mark.parametrize(
    ("call", "query"),
    [
        ("capital of France", "capital of France"),  # plain text
        ('{"name": "search", "arguments": {"query": "Eiffel"}}', "Eiffel"),  # a function call
        (
            '{"name": "search", "arguments": "{\\"query\\": \\"Dijon\\"}"}',
            "Dijon",
        ),  # arguments as a JSON string
        ('{"query": " Berlin "}', "Berlin"),  # a bare query object
        ('{"q": 1}', '{"q": 1}'),  # JSON without a query: the raw text is the query
    ],
)
def test_it_reads_searchp1_tool_calls(call: str, query: str) -> None:
    assert tool_call_query(f"<tool_call>{call}</tool_call>") == query


@pytest.mark.parametrize(
    ("reflect", "reflection", "answers"),
    [
        (
            False,
            "\n<think> sure? </think>\n<answer> Lyon </answer>",
            1,
        ),  # evaluation: stop at the first answer
        (True, "", 1),  # the model declines to reflect (EOS right away)
        (True, "\n<think> Let me verify. </think>\n<answer> Paris </answer>", 2),  # one reflection round
    ],
)
def test_it_gives_tiresrag_one_reflection_round(
    reflect: bool, reflection: str, answers: int, searcher: KeywordSearcher
) -> None:
    def policy(text: str) -> str:
        return reflection if "</answer>" in response(text) else tiresrag_policy(text)

    [rollout], _ = roll("tiresrag", policy, searcher, RolloutConfig(topk=5, reflect=reflect))
    trajectory = parse("tiresrag", rollout.text)
    assert trajectory.valid, trajectory.error
    assert len(trajectory.answers) == answers and rollout.finished
    assert "\n\n<information>\n(1)Paris\nParis is the capital" in rollout.text


def test_it_batches_generation_and_search_across_questions(searcher: KeywordSearcher) -> None:
    questions = [Question(f"q{i}", f"Question {i}", ("Paris",)) for i in range(3)]
    rollouts, backend = roll("search_r1", search_r1_policy, searcher, questions=questions)
    assert [len(batch) for batch in backend.batches] == [3, 3]
    assert searcher.calls == [["capital of France"] * 3]
    assert [r.question.id for r in rollouts] == ["q0", "q1", "q2"]


def test_it_truncates_observations_to_max_obs_tokens(searcher: KeywordSearcher) -> None:
    [rollout], _ = roll("search_r1", search_r1_policy, searcher, RolloutConfig(max_obs_tokens=3))
    assert "<information>Doc 1(Title: Paris)</information>" in rollout.text


def test_it_gives_the_trainer_ids_and_an_env_mask() -> None:
    rollout = Rollout(QUESTION, "search_r1", "search_r1", "prompt")
    rollout.segments.extend([])
    from agent.rollout import Segment

    rollout.segments = [
        Segment("ab", "model", (1, 2), (-0.1, -0.2)),
        Segment("xyz", "env"),
        Segment("c", "model", (3,), (-0.3,)),
    ]
    ids, mask, logprobs = completion_tokens(rollout, lambda text: [ord(ch) for ch in text])
    assert ids == [1, 2, ord("x"), ord("y"), ord("z"), 3]
    assert mask == [1, 1, 0, 0, 0, 1]
    assert logprobs == [-0.1, -0.2, 0.0, 0.0, 0.0, -0.3]
    rollout.segments[2] = Segment("c", "model", (3,))
    assert completion_tokens(rollout, lambda t: [0] * len(t))[2] is None  # a model segment without logprobs


def test_it_starts_the_finished_callback_while_others_still_generate(searcher: KeywordSearcher) -> None:
    events: list[str] = []
    quick_judged = threading.Event()

    def policy(text: str) -> str:
        if "Quick" in text:
            return "<think> known </think><answer> Paris </answer>"
        if "<information>" in response(text):
            # Generation runs in a worker thread, so the event loop can start the quick rollout's judge meanwhile.
            # Wait for it (no fixed sleep: a loaded machine may be slow); a loop that judged only after every
            # rollout finished would never set it, and the order below would show it.
            quick_judged.wait(timeout=30)
            events.append("slow generated its second turn")
        return search_r1_policy(text)

    async def on_finished(rollout: Rollout) -> None:
        events.append(f"judge {rollout.question.id}")
        if rollout.question.id == "quick":
            quick_judged.set()

    class RecordingSearcher(KeywordSearcher):
        def search(self, queries, topk):  # type: ignore[no-untyped-def]
            events.append("search")
            return super().search(queries, topk)

    questions = [Question("quick", "Quick one", ("Paris",)), Question("slow", "Slow one", ("Paris",))]
    backend = ScriptedBackend(policy)

    async def go() -> None:
        await run_rollouts(
            backend,
            RecordingSearcher(searcher.passages and [(d.id, d.contents) for d in searcher.passages]),
            METHODS["search_r1"](),
            questions,
            RolloutConfig(),
            on_finished=on_finished,
        )

    asyncio.run(go())
    assert events.index("judge quick") < events.index("slow generated its second turn")
    assert events[-1] == "judge slow"


def test_hiprag_answers_when_the_rollout_budget_cannot_hold_another_step(searcher: KeywordSearcher) -> None:
    """A policy that would search forever: the step budget allows 8 steps, the token budget about two, so after
    the step the budget cannot follow with another one the rollout is asked for its answer (Alg. 1 lines
    20-22) and ends valid, with an answer, inside its budget."""

    def policy(text: str) -> str:
        r = response(text)
        if r.endswith("<conclusion>"):
            return "found.</conclusion>"
        if r.endswith("<answer>"):
            return "Paris</answer>"
        if r.endswith("</step>"):
            return "\n<step>\n    <reasoning>again</reasoning>\n    <search>Eiffel Tower</search>"
        return " first</reasoning>\n    <search>capital of France</search>"

    config = RolloutConfig(max_turns=8, max_new_tokens=12, max_obs_tokens=20, max_rollout_tokens=160)
    [rollout], _ = roll("hiprag", policy, searcher, config)
    trajectory = parse("hiprag", rollout.text)
    assert trajectory.valid, trajectory.error
    assert (rollout.finished, rollout.end, trajectory.answer) == (True, "answer", "Paris")
    assert 1 <= rollout.n_searches < 8


def test_search_r1_takes_its_final_turn_when_the_rollout_budget_cannot_hold_another_search(
    searcher: KeywordSearcher,
) -> None:
    def policy(text: str) -> str:
        if response(text).count("<information>") >= 1:
            return "<think> enough </think><answer> Paris </answer>"
        return "<think> more </think><search> Paris </search>"

    config = RolloutConfig(max_turns=8, max_new_tokens=12, max_obs_tokens=20, max_rollout_tokens=100)
    [rollout], _ = roll("search_r1", policy, searcher, config)
    assert (rollout.finished, rollout.end, rollout.n_searches) == (True, "answer", 1)
