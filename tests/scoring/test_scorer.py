"""score(): one raw trajectory, a method name, parameters and judge outcomes as JSON values."""

from __future__ import annotations

from typing import Any

import pytest

from scoring.scorer import ScoringInputError, score
from scoring.verdicts import MissingVerdict

HIPRAG_TWO_STEPS = (
    "<think>\n<step>\n<reasoning>who directed it</reasoning>\n<search>Titanic director</search>\n"
    "<context>Doc 1(Title: Titanic) directed by James Cameron</context>\n<conclusion>James Cameron</conclusion>\n"
    "</step>\n<step>\n<reasoning>so</reasoning>\n<conclusion>James Cameron</conclusion>\n</step>\n</think>\n"
    "<answer>James Cameron</answer>"
)
SEARCHR1_ONE_SEARCH = (
    "<think>need it</think>\n<search> Titanic director </search>\n\n<information>Doc 1(Title: Titanic) James "
    "Cameron</information>\n\n<think>found</think>\n<answer> James Cameron </answer>"
)
GOLD = ["James Cameron"]


@pytest.mark.parametrize(
    ("method", "text", "params", "judgements", "total"),
    [
        # Search-R1 v0.3: valid and right = 1
        pytest.param("search_r1", SEARCHR1_ONE_SEARCH, {}, {}, 1.0, id="search-r1-format"),
        # HiPRAG Eq. 1: 1 + λp·N_corr/N with one of two steps over-searched = 1 + 0.4·1/2
        pytest.param("hiprag", HIPRAG_TWO_STEPS, {}, {"step_flags": [True, False]}, 1.2, id="hiprag-half"),
        # verdict names are accepted as well as JSON booleans
        pytest.param(
            "hiprag", HIPRAG_TWO_STEPS, {"lambda_p": 0.5}, {"step_flags": ["false", "false"]}, 1.5, id="names"
        ),
        # AutoSearch: one retrieval step, the self-answer after it is already right (t_c = 1)
        pytest.param(
            "autosearch",
            SEARCHR1_ONE_SEARCH,
            {},
            {"intermediate_answers": ["James Cameron"]},
            None,
            id="autosearch",
        ),
        # TIRESRAG-R1 Eq. 5 late in training: a_t ≈ 0, so R_sum ≈ R_A = 1
        pytest.param(
            "tiresrag",
            SEARCHR1_ONE_SEARCH,
            {"step": 100_000, "total_steps": 100},
            {"sufficiency": True, "thinking": 0.5},
            1.0,
            id="tiresrag-late",
        ),
    ],
)
def test_it_scores_each_method(
    method: str, text: str, params: dict[str, Any], judgements: dict[str, Any], total: float | None
) -> None:
    scored = score(method, text, GOLD, params=params, judgements=judgements)
    assert scored.trajectory.valid
    if total is not None:
        assert scored.reward.total == pytest.approx(total)
    else:
        assert scored.reward.step_rewards  # AutoSearch places a reward on every step
        assert scored.reward.total == pytest.approx(sum(scored.reward.step_rewards))


@pytest.mark.parametrize(
    ("method", "params", "judgements", "field"),
    [
        pytest.param("nope", {}, {}, "method", id="unknown-method"),
        pytest.param("hiprag", {"lambda_x": 1}, {}, "params.lambda_x", id="unknown-param"),
        pytest.param("hiprag", {"lambda_f": 1.5}, {}, "params.lambda_f", id="out-of-range"),
        pytest.param("hiprag", {"lambda_f": "0.2"}, {}, "params.lambda_f", id="string-number"),
        pytest.param("hiprag", {"lambda_f": float("nan")}, {}, "params.lambda_f", id="nan"),
        pytest.param("hiprag", {"process": "sideways"}, {}, "params.process", id="bad-choice"),
        pytest.param("hiprag", {}, {"step_flags": "true"}, "judgements.step_flags", id="flags-not-list"),
        pytest.param(
            "hiprag", {}, {"step_flags": [True, "maybe"]}, "judgements.step_flags[1]", id="bad-verdict"
        ),
        pytest.param("search_p1", {}, {}, "judgements.n_ref_steps", id="required"),
        pytest.param(
            "search_p1", {}, {"n_ref_steps": 2, "evaluation": []}, "judgements.evaluation", id="eval-type"
        ),
        pytest.param(
            "autosearch", {}, {"intermediate_answers": [1]}, "judgements.intermediate_answers", id="answers"
        ),
    ],
)
def test_it_names_the_field_of_bad_input(
    method: str, params: dict[str, Any], judgements: dict[str, Any], field: str
) -> None:
    with pytest.raises(ScoringInputError) as caught:
        score(method, HIPRAG_TWO_STEPS, GOLD, params=params, judgements=judgements)
    assert caught.value.field == field


def test_it_refuses_to_read_a_missing_verdict_as_no() -> None:
    # right answer, valid format: the bonus is due, so the second step's verdict is needed
    with pytest.raises(MissingVerdict, match="step 2"):
        score("hiprag", HIPRAG_TWO_STEPS, GOLD, judgements={"step_flags": [True]})
    with pytest.raises(MissingVerdict, match="step 1"):
        score("hiprag", HIPRAG_TWO_STEPS, GOLD, judgements={"step_flags": ["error", False]})


def test_it_needs_no_verdicts_when_the_answer_is_wrong() -> None:
    scored = score("hiprag", HIPRAG_TWO_STEPS, ["Steven Spielberg"])
    assert scored.reward.total == pytest.approx(0.2)  # λf·F only: Eq. 1 gates the bonus by A(T)


@pytest.mark.parametrize("golds", [[], "James Cameron", [1]])
def test_it_needs_a_list_of_gold_strings(golds: Any) -> None:
    with pytest.raises(ScoringInputError, match="golden_answers"):
        score("search_r1", SEARCHR1_ONE_SEARCH, golds)


@pytest.mark.parametrize(
    ("method", "params", "judgements", "field"),
    [
        pytest.param(
            "search_r1", {"structure_format_score": 10**400}, {}, "params.structure_format_score", id="1e400"
        ),
        pytest.param(
            "search_r1", {"final_format_score": -(10**5000)}, {}, "params.final_format_score", id="-1e5000"
        ),
        pytest.param("search_r1", {"reward": 10**5000}, {}, "params.reward", id="huge-choice"),
        pytest.param("hiprag", {"lambda_p": 2**63}, {}, "params.lambda_p", id="2^63"),
        pytest.param("hiprag", {10**5000: 1}, {}, "params", id="huge-key"),
        pytest.param("hiprag", {}, {"step_flags": [10**5000]}, "judgements.step_flags[0]", id="huge-verdict"),
        pytest.param("tiresrag", {"step": 10**20}, {}, "params.step", id="step"),
        pytest.param("tiresrag", {"total_steps": 2**63}, {}, "params.total_steps", id="total-steps"),
        pytest.param(
            "tiresrag", {}, {"sufficiency": True, "thinking": 10**400}, "judgements.thinking", id="thinking"
        ),
        pytest.param("search_p1", {}, {"n_ref_steps": 10**400}, "judgements.n_ref_steps", id="n-ref-steps"),
        pytest.param(
            "search_p1",
            {},
            {
                "n_ref_steps": 1,
                "evaluation": {
                    "planner_score": 10**400,
                    "model_plan_steps": 1,
                    "effective_steps_self": 1,
                    "effective_steps_ref": 1,
                    "outcome_accuracy_score": 1,
                    "outcome_reasoning_score": 1,
                },
            },
            "judgements.evaluation",
            id="planner-score",
        ),
    ],
)
def test_it_bounds_every_number_without_overflow(
    method: str, params: dict[Any, Any], judgements: dict[str, Any], field: str
) -> None:
    with pytest.raises(ScoringInputError) as caught:
        score(method, HIPRAG_TWO_STEPS, GOLD, params=params, judgements=judgements)
    assert caught.value.field == field
    assert len(str(caught.value)) < 200  # a 5,000-digit number is named by its size, not echoed


def test_the_huge_integer_repro_names_the_parameter_and_its_range() -> None:
    with pytest.raises(ScoringInputError) as caught:
        score("search_r1", "<answer>a</answer>", ["a"], params={"structure_format_score": 10**400})
    assert str(caught.value) == (
        "params.structure_format_score: must lie in [0.0, 1.0], got an integer of about 401 digits"
    )
