"""scoring.params: each method's weights parsed into its dataclass, with the scorer's errors naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from scoring.params import (
    HipragParams,
    SearchP1Params,
    SearchR1Params,
    TiresragParams,
    param_help,
    parse_params,
)
from scoring.scorer import METHODS, ScoringInputError, method_params, score


def test_an_absent_weight_takes_the_papers_default() -> None:
    assert parse_params(HipragParams, {}) == HipragParams(lambda_f=0.2, lambda_p=0.4, process="both")
    assert parse_params(SearchP1Params, None).weights().lambda_a == 0.6  # Search-P1 Appendix B.2
    assert (parse_params(TiresragParams, {}).w_thinking, TiresragParams().w_reflection) == (
        0.6,
        0.3,
    )  # App. C.1


def test_a_number_is_read_as_a_float_and_a_choice_as_given() -> None:
    params = parse_params(HipragParams, {"lambda_p": 1, "process": "over_only", "batch_average_bonus": 0})
    assert (params.lambda_p, type(params.lambda_p), params.process) == (1.0, float, "over_only")
    assert params.batch_average_bonus == 0.0


@pytest.mark.parametrize(
    ("params_type", "values", "field", "message"),
    [
        (HipragParams, {"lambda_p": 11}, "params.lambda_p", "must lie in [0.0, 10.0], got 11"),
        (
            HipragParams,
            {"lambda_f": True},
            "params.lambda_f",
            "must be a finite number, got True",
        ),  # bool ≠ number
        (HipragParams, {"lambda_f": float("nan")}, "params.lambda_f", "must be a finite number, got nan"),
        # a huge int is refused before float() could overflow, and not echoed whole
        (HipragParams, {"lambda_f": 10**400}, "params.lambda_f", "got an integer of about 401 digits"),
        (
            HipragParams,
            {"process": "sometimes"},
            "params.process",
            "must be one of both, over_only, under_only",
        ),
        (
            HipragParams,
            {"lambda_x": 1},
            "params.lambda_x",
            "unknown; expected one of lambda_f, lambda_p, process",
        ),
        (HipragParams, [], "params", "must be an object, got list"),
        (HipragParams, {1: 2}, "params", "keys must be strings, got 1"),
        (TiresragParams, {"step": 1.5}, "params.step", "must be an integer in [0, 100000000], got 1.5"),
        (TiresragParams, {"total_steps": 0}, "params.total_steps", "must be an integer in [1, 100000000]"),
        (SearchP1Params, {"variant": "alg4"}, "params.variant", "must be one of main, alg3"),
        # Search-R1's format reward stays in [0, 1]: a cross-field check, naming the second weight
        (
            SearchR1Params,
            {"structure_format_score": 0.8, "retrieval_score": 0.5},
            "params.retrieval_score",
            "structure_format_score + retrieval_score must be <= 1",
        ),
    ],
)
def test_a_bad_weight_names_its_field(params_type: type, values: Any, field: str, message: str) -> None:
    with pytest.raises(ScoringInputError) as raised:
        parse_params(params_type, values)
    assert raised.value.field == field
    assert message in raised.value.message


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("hiprag", {"lambda_p": -1}),
        ("search_p1", {"alpha": 2}),
        ("tiresrag", {"w_thinking": "0.6"}),
        ("autosearch", {"lambda_f": 0.1}),  # AutoSearch has no weight at all
        ("search_r1", {"reward": "em"}),
    ],
)
def test_checking_params_gives_the_error_scoring_gives(method: str, params: dict[str, Any]) -> None:
    with pytest.raises(ScoringInputError) as checked:
        method_params(method, params)
    with pytest.raises(ScoringInputError) as scored:
        score(method, "<answer>Paris</answer>", ["Paris"], params=params)
    assert (checked.value.field, checked.value.message) == (scored.value.field, scored.value.message)


def test_an_unknown_method_is_named() -> None:
    with pytest.raises(ScoringInputError) as raised:
        method_params("nope", {})
    assert raised.value.field == "method"


def test_a_weights_help_gives_its_equation_default_and_range() -> None:
    assert (
        param_help(HipragParams, "lambda_p")
        == "λp, the process-bonus weight of HiPRAG Eq. 1; default 0.4, [0, 10]"
    )
    assert param_help(HipragParams, "process").endswith("default both, both | over_only | under_only")
    assert param_help(TiresragParams, "step").endswith("default 0, [0, 100000000]")


def test_the_scorer_reads_its_weights_from_the_dataclass() -> None:
    hiprag = (
        "<think><step><reasoning>I know.</reasoning><conclusion>Paris</conclusion></step></think>"
        "<answer>Paris</answer>"
    )
    assert METHODS["hiprag"].params_type is HipragParams
    paper = score("hiprag", hiprag, ["Paris"], judgements={"step_flags": [False]})
    heavier = score("hiprag", hiprag, ["Paris"], params={"lambda_p": 1}, judgements={"step_flags": [False]})
    # Eq. 1: R = A(1 − λf) + λf·F + λp·A·F·N_corr/N; one correct non-search step, A = F = 1
    assert (paper.reward.total, heavier.reward.total) == pytest.approx((1.4, 2.0))
