"""scoring.audit_weights: strata, allocation with over-sampling, Horvitz–Thompson weights and weighted estimates."""

from __future__ import annotations

import pytest

from scoring.audit_weights import (
    allocate,
    disagreement_stratum,
    stratified_draw,
    training_phase,
    verdict_stratum,
    weighted_accuracy,
)
from scoring.correct import AuditCounts


@pytest.mark.parametrize(
    ("step", "first", "last", "phase"),
    [
        (0, 0, 8, "early"),
        (2, 0, 8, "early"),
        (3, 0, 8, "middle"),
        (6, 0, 8, "late"),
        (8, 0, 8, "late"),
        (10, 10, 11, "early"),  # two steps: early and middle, no late
        (11, 10, 11, "middle"),
    ],
)
def test_it_splits_the_training_steps_into_thirds(step: int, first: int, last: int, phase: str) -> None:
    assert training_phase(step, first, last) == phase


def test_it_refuses_a_step_outside_the_run() -> None:
    with pytest.raises(ValueError, match="training step 12 lies outside"):
        training_phase(12, 0, 10)


def test_it_puts_trajectories_in_verdict_and_disagreement_strata() -> None:
    assert verdict_stratum([False, True]) == "flagged"
    assert verdict_stratum([]) == "unflagged"
    assert disagreement_stratum({1: True, 2: False}, {1: True, 2: True}) == "disagree"
    assert (
        disagreement_stratum({1: True, 2: False}, {1: True, 3: True}) == "agree"
    )  # step 2/3 judged by one only


@pytest.mark.parametrize(
    ("sizes", "n", "oversample", "expected"),
    [
        ({"a": 7, "b": 5}, 8, None, {"a": 5, "b": 3}),  # proportional, largest remainder
        ({"flagged": 40, "unflagged": 960}, 100, {"flagged": 5.0}, {"flagged": 17, "unflagged": 83}),
        (
            {"flagged": 10, "unflagged": 990},
            100,
            {"flagged": 50.0},
            {"flagged": 10, "unflagged": 90},
        ),  # capped
        ({"x": 1, "y": 999}, 10, None, {"x": 1, "y": 9}),  # a tiny stratum still gets one draw
        ({"a": 3, "b": 0}, 3, None, {"a": 3, "b": 0}),  # an empty stratum gets none
    ],
)
def test_it_allocates_draws_to_strata(
    sizes: dict[str, int], n: int, oversample: dict[str, float] | None, expected: dict[str, int]
) -> None:
    assert allocate(sizes, n, oversample) == expected


@pytest.mark.parametrize(
    ("sizes", "n", "oversample", "message"),
    [
        ({"a": 3}, 4, None, "cannot draw 4"),
        ({"a": 3}, 2, {"a": 0.0}, "factor of stratum 'a'"),
        ({"a": -1}, 0, None, "negative size"),
    ],
)
def test_it_refuses_an_impossible_allocation(
    sizes: dict[str, int], n: int, oversample: dict[str, float] | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        allocate(sizes, n, oversample)


def test_it_draws_reproducibly_with_inverse_inclusion_weights() -> None:
    candidates = [(i, "flagged" if i % 10 == 0 else "unflagged") for i in range(200)]
    drawn = stratified_draw(candidates, 40, seed=5, oversample={"flagged": 4.0})
    assert drawn == stratified_draw(list(reversed(candidates)), 40, seed=5, oversample={"flagged": 4.0})
    assert len({d.id for d in drawn}) == 40
    flagged = [d for d in drawn if d.stratum == "flagged"]
    unflagged = [d for d in drawn if d.stratum == "unflagged"]
    # 20 flagged × 4 = 80 against 180 unflagged: 40 · 80/260 ≈ 12.3 → 12 flagged, 28 unflagged.
    assert len(flagged) == 12 and len(unflagged) == 28
    assert all(d.weight == pytest.approx(20 / 12) for d in flagged)
    assert all(d.weight == pytest.approx(180 / 28) for d in unflagged)
    # The weights add up to the population: Σ 1/π = N.
    assert sum(d.weight for d in drawn) == pytest.approx(200)


def test_it_weights_the_judges_accuracy() -> None:
    flagged = AuditCounts(
        tp=1, fp=1, fn=0, tn=0
    )  # the judge is right on half of a flagged trajectory's steps
    clean = AuditCounts(tp=0, fp=0, fn=0, tn=2)  # and on all of an unflagged one's
    unweighted = weighted_accuracy([(flagged, 1.0), (clean, 1.0)])
    assert unweighted.accuracy == pytest.approx(3 / 4)
    # The unflagged trajectory stands for 9 (it was drawn with probability 1/9): accuracy (1 + 18) / (2 + 18).
    weighted = weighted_accuracy([(flagged, 1.0), (clean, 9.0)])
    assert weighted.accuracy == pytest.approx(19 / 20)
    assert weighted.specificity == pytest.approx(18 / 19)
    assert weighted.sensitivity == pytest.approx(1.0)
    assert weighted.precision == pytest.approx(0.5)
    assert (
        weighted.n_steps == 4
        and weighted.n_trajectories == 2
        and weighted.weighted_steps == pytest.approx(20)
    )


def test_it_gives_none_where_a_statistic_has_no_steps() -> None:
    result = weighted_accuracy([(AuditCounts(0, 0, 0, 3), 1.0)])
    assert result.accuracy == 1.0 and result.specificity == 1.0
    assert result.sensitivity is None and result.precision is None
    with pytest.raises(ValueError, match="item 0 has weight 0"):
        weighted_accuracy([(AuditCounts(0, 0, 0, 3), 0.0)])
