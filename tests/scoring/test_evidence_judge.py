"""The evidence judge's rules (scoring.judging.evidence), one by one, on HiPRAG trajectories."""

from __future__ import annotations

from scoring.formats import parse
from scoring.judging.evidence import over_search_flags, query_similarity, retrieved_titles, under_search_flags
from scoring.verdicts import Verdict

T, F = Verdict.TRUE, Verdict.FALSE


def step(reasoning: str, conclusion: str, query: str | None = None, titles: tuple[str, ...] = ()) -> str:
    if query is None:
        return f"<step>\n    <reasoning>{reasoning}</reasoning>\n    <conclusion>{conclusion}</conclusion>\n</step>\n"
    docs = "\n".join(f"Doc {i}(Title: {t}) {t} is a thing." for i, t in enumerate(titles, start=1))
    return (
        f"<step>\n    <reasoning>{reasoning}</reasoning>\n    <search>{query}</search>\n"
        f"    <context>{docs}</context>\n    <conclusion>{conclusion}</conclusion>\n</step>\n"
    )


def hiprag(*steps: str, answer: str = "Paris") -> object:
    trajectory = parse("hiprag", f"<think>\n{''.join(steps)}</think>\n<answer>{answer}</answer>")
    assert trajectory.valid, trajectory.error
    return trajectory


def test_a_search_that_brings_a_new_supporting_passage_is_necessary_and_one_that_brings_none_is_over_search():
    trajectory = hiprag(
        step("Find the tower.", "It is in Paris.", "Eiffel Tower location", ("Eiffel Tower", "Berlin")),
        step("Find the engineer.", "Gustave Eiffel.", "Eiffel Tower engineer", ("Eiffel Tower", "Berlin")),
        step("Find his birthplace.", "Dijon.", "Gustave Eiffel birthplace", ("Gustave Eiffel",)),
    )
    flags = over_search_flags(trajectory, ["Eiffel Tower", "Gustave Eiffel"])
    assert flags == {0: F, 1: T, 2: F}  # step 1 retrieved only what step 0 already had


def test_a_repeated_query_is_over_search_even_without_supporting_titles():
    trajectory = hiprag(
        step("Look.", "Paris.", "capital of France", ("Paris",)),
        step("Look again.", "Paris.", "France capital", ("Paris",)),
    )
    assert query_similarity("capital of France", "France capital") == 1.0
    assert over_search_flags(trajectory) == {0: F, 1: T}


def test_a_non_search_step_is_under_search_only_when_neither_correct_nor_grounded():
    trajectory = hiprag(
        step("Find the tower.", "The tower is in Paris.", "Eiffel Tower", ("Eiffel Tower",)),
        step(
            "Recall.", "Gustave Eiffel designed the Eiffel Tower thing."
        ),  # grounded in the passage/question
        step("Guess.", "Napoleon Bonaparte conquered Moscow."),  # asserted from nowhere, and wrong
        step("Recall.", "The answer is Paris."),  # correct
    )
    flags = under_search_flags(trajectory, "Who designed the Eiffel Tower?", ["Paris"])
    assert flags == {1: F, 2: T, 3: F}


def test_titles_are_read_from_hiprag_context_headers_parentheses_included():
    context = "Doc 1(Title: Paris) text\nDoc 2(Title: Titanic (1997 film)) more"
    assert retrieved_titles(context) == ["Paris", "Titanic (1997 film)"]


def test_each_over_search_flag_names_the_rule_that_raised_it() -> None:
    from scoring.judging.evidence import (
        ALREADY_RETRIEVED,
        NO_NEW_SUPPORT,
        REPEATED_QUERY,
        OverSearchFinding,
        over_search_findings,
    )

    trajectory = hiprag(
        step("Find the tower.", "Paris.", "Eiffel Tower location", ("Eiffel Tower",)),
        step("Again.", "Paris.", "Eiffel Tower location", ("Eiffel Tower",)),  # the same query
        step("Again, other words.", "Paris.", "where is the tower", ("Eiffel Tower", "Berlin")),  # in hand
        step("Find the engineer.", "?", "tower engineer", ("Berlin",)),  # the engine missed Gustave Eiffel
        step(
            "Find his birthplace.", "Dijon.", "Gustave Eiffel birthplace", ("Gustave Eiffel",)
        ),  # new support
        step("Check.", "Dijon.", "Dijon mayor", ("Dijon",)),  # all support already in hand
    )
    findings = over_search_findings(trajectory, ["Eiffel Tower", "Gustave Eiffel"])
    assert findings == {
        0: OverSearchFinding(F),
        1: OverSearchFinding(T, REPEATED_QUERY),
        2: OverSearchFinding(T, ALREADY_RETRIEVED),
        3: OverSearchFinding(T, NO_NEW_SUPPORT),
        4: OverSearchFinding(F),
        5: OverSearchFinding(T, ALREADY_RETRIEVED),
    }
    assert over_search_flags(trajectory, ["Eiffel Tower", "Gustave Eiffel"]) == {
        i: f.verdict for i, f in findings.items()
    }


def test_osr_can_be_read_without_retrieval_misses() -> None:
    from scoring.aggregates import TrajectoryOutcome, evaluation_report

    outcomes = [
        TrajectoryOutcome(
            "nq",
            cem=True,
            em=True,
            f1=1.0,
            format_ok=True,
            n_searches=4,
            over_search=(F, T, T, Verdict.ERROR),
            over_search_rules=(None, "repeated_query", "no_new_support", "no_new_support"),
        ),
        TrajectoryOutcome("nq", cem=True, em=True, f1=1.0, format_ok=True, n_searches=1, over_search=(T,)),
    ]
    row = evaluation_report(outcomes).overall_micro
    # HiPRAG Eq. 2 over the 4 usable verdicts: 3 flagged; one of them by the retrieval-miss rule (the error is
    # in neither count); a flag without a rule (an LLM judge's) stays over-search
    assert (row.osr, row.osr_redundant, row.n_retrieval_misses, row.n_judge_errors) == (0.75, 0.5, 1, 1)
