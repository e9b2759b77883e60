"""The scorer's fast paths for common input shapes give what the full checks give, at every edge of those shapes."""

from __future__ import annotations

import re
import string
from collections import Counter, UserDict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.metrics import _common_count, exact_match, normalize_answer, substring_match
from scoring.scorer import BatchItem, ScoringInputError, check_golds, score_batch
from scoring.verdicts import MissingVerdict, Verdict

TEXT = (
    "<think>\n<step>\n<reasoning>look</reasoning>\n<search>capital of France</search>\n"
    "<context>Paris</context>\n<conclusion>Paris</conclusion>\n</step>\n"
    "<step>\n<reasoning>so</reasoning>\n<conclusion>Paris</conclusion>\n</step>\n</think>\n<answer>Paris</answer>"
)


DELETE_PUNCTUATION = str.maketrans("", "", string.punctuation)


class Golds(list[str]):
    """A list subclass: not the fast path's exact list, still a sequence of strings."""


@pytest.mark.parametrize(
    ("golds", "valid"),
    [
        (["Paris"], True),
        (("Paris", "paris"), True),
        (Golds(["Paris"]), True),
        ([], False),
        ((), False),
        ("Paris", False),
        (["Paris", 3], False),
        ([b"Paris"], False),
        ({"Paris"}, False),
        (None, False),
    ],
)
def test_golds_of_every_shape_are_accepted_or_refused_naming_the_field(golds: Any, valid: bool) -> None:
    if valid:
        check_golds(golds)
    else:
        with pytest.raises(ScoringInputError) as caught:
            check_golds(golds)
        assert caught.value.field == "golden_answers"


def _hiprag(judgements: Any) -> Any:
    return score_batch("hiprag", [BatchItem(TEXT, ["Paris"], judgements)])[0]


def test_judgements_as_a_mapping_other_than_a_dict_read_as_the_dict() -> None:
    flags = {"step_flags": [False, True]}
    assert _hiprag(UserDict(flags)).reward == _hiprag(flags).reward
    assert _hiprag(flags).reward.total == pytest.approx(1.2)


@pytest.mark.parametrize(
    ("judgements", "field"),
    [
        ({"step_flags": [False, True], "bogus": 1}, "judgements.bogus"),
        ({"step_flags": [False, True], 3: 1}, "judgements"),
        ({"step_flags": [False, 1]}, "judgements.step_flags[1]"),
        ({"step_flags": [0.0, False]}, "judgements.step_flags[0]"),
        ({"step_flags": (False, True)}, "judgements.step_flags"),
        ({"step_flags": [False, True, False]}, "judgements.step_flags"),
        ([("step_flags", [False])], "judgements"),
    ],
)
def test_judgements_off_the_common_shape_name_the_field_at_fault(judgements: Any, field: str) -> None:
    result = _hiprag(judgements)
    assert isinstance(result, ScoringInputError)
    assert result.field == field


def test_verdict_names_and_booleans_mixed_read_as_verdicts() -> None:
    mixed = _hiprag({"step_flags": ["TRUE", False]})
    assert mixed.reward == _hiprag({"step_flags": [True, False]}).reward
    missing = _hiprag({"step_flags": [False, Verdict.ERROR.value]})
    assert isinstance(missing, MissingVerdict)
    assert "step 2" in str(missing)


@given(st.lists(st.sampled_from("abcd")), st.lists(st.sampled_from("abce")))
def test_the_shared_token_count_is_the_counters_intersection(pred: list[str], gold: list[str]) -> None:
    assert _common_count(pred, gold) == sum((Counter(pred) & Counter(gold)).values())


@given(
    st.lists(
        st.sampled_from(
            ["a", "an", "the", "The", "then", "x1", "U.S.", "théâtre", "-", " ", "\n", "\x1c", "\t"]
        )
    ).map("".join)
)
def test_normalize_answer_is_squads_regex_normalization(text: str) -> None:
    squad = " ".join(re.sub(r"\b(a|an|the)\b", " ", text.lower().translate(DELETE_PUNCTUATION)).split())
    assert normalize_answer(text) == squad


def test_matches_against_golds_read_the_cached_normal_forms_alike() -> None:
    for _ in range(2):  # the second call reads the golds' cached forms
        assert exact_match("The Paris!", ["paris", "Lyon"])
        assert not exact_match("Paris, France", ["paris"])
        assert substring_match("Paris, France", "PARIS")
