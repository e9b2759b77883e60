"""Paired bootstrap of method-minus-baseline differences (scoring.paired_bootstrap)."""

from __future__ import annotations

import random

import pytest

from scoring.paired_bootstrap import METRICS, pair_by_key, paired_bootstrap, question_ratios
from scoring.verdicts import Verdict


def row(
    correct: bool, searches: int, over: tuple[Verdict | bool | None, ...] = ()
) -> dict[str, tuple[float, float]]:
    return question_ratios(
        cem=correct,
        em=correct,
        f1=1.0 if correct else 0.0,
        format_ok=True,
        n_searches=searches,
        over_search=over,
    )


def test_it_counts_step_flags_as_the_aggregates_do() -> None:
    ratios = question_ratios(
        cem=True,
        em=False,
        f1=0.5,
        format_ok=False,
        n_searches=3,
        over_search=(Verdict.TRUE, False, Verdict.ERROR, None, True),
        under_search=(Verdict.UNPARSEABLE,),
    )
    assert ratios["osr"] == (2.0, 3.0)  # errors and missing verdicts are in neither count
    assert ratios["usr"] == (0.0, 0.0)
    assert ratios["average_searches"] == (3.0, 1.0) and ratios["f1"] == (0.5, 1.0)
    assert (
        ratios["cem"] == (1.0, 1.0) and ratios["em"] == (0.0, 1.0) and ratios["format_ok_rate"] == (0.0, 1.0)
    )
    assert set(ratios) == set(METRICS)


def test_it_gives_the_point_difference_and_an_interval_around_it() -> None:
    rng = random.Random(3)
    baseline = [row(rng.random() < 0.4, 2, (True, rng.random() < 0.3)) for _ in range(200)]
    method = [row(rng.random() < 0.4, 1, (rng.random() < 0.05,)) for _ in range(200)]

    result = paired_bootstrap(baseline, method, n_resamples=500, seed=1)

    searches = result["average_searches"]
    assert (searches.baseline, searches.method, searches.difference) == (2.0, 1.0, -1.0)
    assert searches.low == searches.high == -1.0  # every question differs by exactly one search
    osr = result["osr"]
    assert osr.difference is not None and osr.low is not None and osr.high is not None
    assert osr.low <= osr.difference <= osr.high < 0 and osr.excludes_zero
    assert osr.n_pairs == 200 and osr.n_resamples == 500 and osr.n_undefined == 0
    assert result["usr"].difference is None and result["usr"].low is None  # no judged non-search step at all
    assert result["usr"].n_undefined == 500


def test_pairing_removes_the_questions_difficulty() -> None:
    """The same questions right and wrong in both runs: a paired interval is 0 wide, an unpaired one would not be."""
    questions = [row(i % 2 == 0, 1) for i in range(100)]
    result = paired_bootstrap(questions, list(questions), ["em"], n_resamples=200)
    assert (result["em"].low, result["em"].high, result["em"].difference) == (0.0, 0.0, 0.0)
    assert not result["em"].excludes_zero


def test_it_is_deterministic_for_a_seed() -> None:
    rng = random.Random(0)
    baseline = [row(rng.random() < 0.5, rng.randint(0, 3)) for _ in range(50)]
    method = [row(rng.random() < 0.5, rng.randint(0, 3)) for _ in range(50)]
    first = paired_bootstrap(baseline, method, n_resamples=300, seed=7)
    assert first == paired_bootstrap(baseline, method, n_resamples=300, seed=7)
    assert first != paired_bootstrap(baseline, method, n_resamples=300, seed=8)


def test_it_leaves_out_resamples_where_a_rate_is_undefined() -> None:
    baseline = [row(True, 1, (True,)), row(True, 0)]
    method = [row(True, 1, (False,)), row(True, 0)]
    osr = paired_bootstrap(baseline, method, ["osr"], n_resamples=400, seed=0)["osr"]
    assert osr.difference == -1.0 and osr.low == osr.high == -1.0
    assert 0 < osr.n_undefined < 400  # the draws of the search-free question only


def test_it_handles_one_and_no_questions() -> None:
    one = paired_bootstrap([row(False, 2)], [row(True, 1)], n_resamples=10)
    assert one["em"].difference == one["em"].low == one["em"].high == 1.0
    empty = paired_bootstrap([], [], n_resamples=10)
    assert empty["em"].difference is None and empty["em"].n_resamples == 0 and empty["em"].n_pairs == 0


def test_it_refuses_unpaired_or_malformed_input() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap([row(True, 1)], [])
    with pytest.raises(ValueError, match="no value for 'em'"):
        paired_bootstrap([{"cem": (1.0, 1.0)}], [{"cem": (1.0, 1.0)}], ["cem", "em"])
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap([], [], confidence=1.0)


def test_pair_by_key_keeps_the_questions_both_runs_answered_in_the_baselines_order() -> None:
    a, b, c = row(True, 1), row(False, 2), row(True, 3)
    keys, left, right = pair_by_key({"q2": b, "q1": a, "q3": c}, {"q1": c, "q2": a, "q4": b})
    assert keys == ["q2", "q1"] and left == [b, a] and right == [a, c]


def test_it_pairs_flashrag_acc_beside_cem() -> None:
    def scored(cem: bool, acc: bool | None) -> dict[str, tuple[float, float]]:
        return question_ratios(cem=cem, em=False, f1=0.0, format_ok=True, n_searches=1, acc=acc)

    assert scored(False, True)["acc"] == (1.0, 1.0) and scored(False, None)["acc"] == (0.0, 0.0)
    baseline = [scored(False, False), scored(True, True), scored(False, False), scored(True, None)]
    method = [scored(False, True), scored(True, True), scored(True, True), scored(True, True)]
    result = paired_bootstrap(baseline, method, n_resamples=200, seed=0)
    acc = result["acc"]
    # acc: baseline 1 of 3 measured, method 4 of 4; CEM: baseline 2 of 4, method 3 of 4
    assert acc.baseline == 1 / 3 and acc.method == 1.0
    assert acc.difference == pytest.approx(2 / 3)
    assert result["cem"].difference == 0.25
