"""The released code's edge cases: where searchlab matches it and where it documents a difference (docs/scale.md,
"Differences from the released code at the edges")."""

from __future__ import annotations

import math
import sys
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.formats.searchr1 import make_prefix
from scoring.rewards import searchr1
from scoring.rewards.tiresrag_reference import (
    JudgeServerReply,
    MathRuleProxyReference,
    difficulty_weight_reference,
)

GOLD = "Eddie Argos"


def _numpy_difficulty_weight(rho: float) -> float:
    """The released ``difficulty_weight`` on a numpy float64, as TIRESRAG-R1's trainer ran it."""
    numpy = pytest.importorskip("numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # np.exp overflow: inf, with a warning
        return float(0.4 + (1.5 - 0.4) / (1.0 + numpy.exp(10.0 * (numpy.float64(rho) - 0.75))))


def test_the_difficulty_weight_saturates_where_numpy_overflows() -> None:
    assert difficulty_weight_reference(80.0) == 0.4  # exp(792.5) = inf in numpy: W = A
    assert difficulty_weight_reference(sys.float_info.max) == 0.4
    assert difficulty_weight_reference(math.inf) == 0.4
    assert difficulty_weight_reference(-math.inf) == 1.5
    assert math.isnan(difficulty_weight_reference(math.nan))


@given(st.floats(allow_nan=False))
def test_the_difficulty_weight_never_raises_and_matches_numpy(rho: float) -> None:
    assert difficulty_weight_reference(rho) == _numpy_difficulty_weight(rho)


def test_a_judges_raw_sufficiency_of_100_does_not_crash_the_reward_server() -> None:
    server = MathRuleProxyReference([{"question": "Who sings in Art Brut?", "answer": GOLD}])

    def query(response: str) -> str:
        return (
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nWho sings in Art Brut?<|im_end|>\n"
            f"<|im_start|>assistant\n{response}<|im_end|>"
        )

    queries = [query(f"<think>a</think><answer>{GOLD}</answer>"), query("<think>b</think><answer>X</answer>")]
    # the released parser passes a sufficiency of 100 through raw; ρ = 100 overflows the weight's exponent
    result = server.get_reward(queries, 2, [0, 0], 100, 90, JudgeServerReply(200, [100, 100], [0.5, 1.0]))
    assert result.rewards["difficulty"] == [0.4, 0.4]
    # a_t = 0.5: 1 + 0.5·(0.3 + 30 + 0) and 0 + 0.5·(0.6 + 30 − 0.3) (a single wrong answer reflects −1)
    assert result.rewards["总的分数"] == pytest.approx([16.15, 15.15])


def test_a_string_target_is_one_gold_answer_not_its_characters() -> None:
    # Search-R1's em_check iterates over a str target's characters (so "P" would match "Paris"); searchlab wraps
    # a string in a list: the answer must match the whole string.
    response = "<|im_start|>assistant\n<think>x</think>\n<answer>P</answer>"
    text = make_prefix("What is the capital of France?") + response
    assert searchr1.searchr1_em_reward_reference(text, "Paris") == 0.0
    assert searchr1.searchr1_em_reward_reference(text.replace(">P<", ">Paris<"), "Paris") == 1.0
    assert searchr1.searchr1_format_reward_reference(text, "Paris", structure_format_score=0.2) == 0.2
