"""scoring.seed_bootstrap: the two-level (seed pairs, then questions) bootstrap, on synthetic data whose answer is
known."""

from __future__ import annotations

import random

import pytest

from scoring.paired_bootstrap import Ratio, paired_bootstrap, question_ratios
from scoring.seed_bootstrap import SeedPair, seed_bootstrap

METRICS = ("cem", "average_searches", "osr")


def arm(rng: random.Random, n: int, *, p_correct: float, searches: float) -> dict[str, dict[str, Ratio]]:
    """n questions answered by one synthetic trained model: CEM with probability p_correct, about ``searches``
    searches, each search flagged redundant with probability 0.5."""
    rows = {}
    for i in range(n):
        k = max(0, round(rng.gauss(searches, 0.7)))
        rows[f"q{i}"] = question_ratios(
            cem=rng.random() < p_correct,
            em=False,
            f1=0.0,
            format_ok=True,
            n_searches=k,
            over_search=[rng.random() < 0.5 for _ in range(k)],
        )
    return rows


def test_one_pair_is_the_one_level_paired_interval() -> None:
    rng = random.Random(1)
    base, method = arm(rng, 120, p_correct=0.3, searches=2.0), arm(rng, 120, p_correct=0.35, searches=1.0)
    result = seed_bootstrap([SeedPair("s0", base, method)], METRICS, n_resamples=500, seed=4)
    keys = list(base)
    one = paired_bootstrap(
        [base[k] for k in keys], [method[k] for k in keys], METRICS, n_resamples=500, seed=4
    )
    for metric in METRICS:
        pooled = result.pooled[metric]
        assert (pooled.difference, pooled.low, pooled.high) == (
            one[metric].difference,
            one[metric].low,
            one[metric].high,
        )
        assert result.pairs[0][1][metric] == one[metric]  # the per-pair table is that interval too


def test_zero_between_seed_variance_reduces_to_the_one_level_interval() -> None:
    rng = random.Random(2)
    base, method = arm(rng, 150, p_correct=0.3, searches=2.0), arm(rng, 150, p_correct=0.3, searches=1.2)
    pairs = [SeedPair(f"s{i}", base, method) for i in range(3)]  # three identical seed pairs
    result = seed_bootstrap(pairs, METRICS, n_resamples=400, seed=9)
    keys = list(base)
    one = paired_bootstrap(
        [base[k] for k in keys], [method[k] for k in keys], METRICS, n_resamples=400, seed=9
    )
    for metric in METRICS:
        pooled = result.pooled[metric]
        assert pooled.design == "crossed" and pooled.n_pairs == 3 and pooled.n_questions == 150
        assert pooled.difference == pytest.approx(one[metric].difference, abs=1e-12)
        assert pooled.low == pytest.approx(one[metric].low, abs=1e-12)
        assert pooled.high == pytest.approx(one[metric].high, abs=1e-12)
    assert result.pooled["average_searches"].same_sign and result.pooled["average_searches"].high < 0


def test_between_seed_spread_widens_the_interval_and_the_pooled_difference_is_the_mean() -> None:
    """Pairs whose effects differ (−1.6, −0.8, −0.1 searches): the pooled difference is their mean, and the interval
    is wider than one pair's question-only interval because seeds are resampled."""
    rng = random.Random(3)
    base = arm(rng, 200, p_correct=0.3, searches=2.0)
    effects = (1.6, 0.8, 0.1)
    pairs = [
        SeedPair(f"s{i}", base, arm(rng, 200, p_correct=0.3, searches=2.0 - e)) for i, e in enumerate(effects)
    ]
    result = seed_bootstrap(pairs, METRICS, n_resamples=600, seed=0)
    searches = result.pooled["average_searches"]
    per_pair = [d["average_searches"] for _, d in result.pairs]
    assert searches.difference == pytest.approx(sum(d.difference for d in per_pair) / 3)  # type: ignore[misc]
    assert per_pair[0].difference < per_pair[1].difference < per_pair[2].difference < 0  # type: ignore[operator]
    widest_pair = max(d.high - d.low for d in per_pair)  # type: ignore[operator]
    assert searches.high - searches.low > 2 * widest_pair  # type: ignore[operator]
    assert searches.same_sign  # every pair has fewer searches in the method arm
    assert [label for label, _ in result.pairs] == ["s0", "s1", "s2"]


def test_a_pair_where_the_rate_is_undefined_is_left_out_of_the_mean() -> None:
    rng = random.Random(5)
    base = arm(rng, 60, p_correct=0.3, searches=2.0)
    silent = arm(rng, 60, p_correct=0.3, searches=-5.0)  # never searches: OSR undefined
    searching = arm(rng, 60, p_correct=0.3, searches=1.0)
    result = seed_bootstrap(
        [SeedPair("a", base, searching), SeedPair("b", base, silent)], METRICS, n_resamples=200, seed=1
    )
    osr = result.pooled["osr"]
    assert osr.n_pairs == 2 and osr.n_pairs_defined == 1 and not osr.same_sign
    assert osr.difference == pytest.approx(result.pairs[0][1]["osr"].difference)
    assert result.pairs[1][1]["osr"].difference is None
    assert osr.low is not None and osr.n_undefined < 200  # resamples that drew only pair b are undefined


def test_pairs_on_different_questions_are_resampled_nested() -> None:
    rng = random.Random(6)
    pairs = [
        SeedPair("a", arm(rng, 40, p_correct=0.5, searches=1), arm(rng, 40, p_correct=0.5, searches=1)),
        SeedPair(
            "b",
            {f"x{k}": v for k, v in arm(rng, 30, p_correct=0.5, searches=1).items()},
            {f"x{k}": v for k, v in arm(rng, 30, p_correct=0.5, searches=1).items()},
        ),
    ]
    result = seed_bootstrap(pairs, METRICS, n_resamples=100, seed=2)
    assert result.pooled["cem"].design == "nested" and result.pooled["cem"].n_questions == 70
    again = seed_bootstrap(pairs, METRICS, n_resamples=100, seed=2)
    assert again.pooled == result.pooled  # deterministic


def test_bad_input_is_named() -> None:
    rng = random.Random(7)
    rows = arm(rng, 5, p_correct=0.5, searches=1)
    with pytest.raises(ValueError, match="no seed pairs"):
        seed_bootstrap([], METRICS)
    with pytest.raises(ValueError, match="seed pair 'a': no question answered by both arms"):
        seed_bootstrap([SeedPair("a", rows, {"other": rows["q0"]})], METRICS)
    broken = {**rows, "q3": {"cem": (1.0, 1.0)}}
    with pytest.raises(
        ValueError, match=r"seed pair 'a', method, question 'q3': no value for 'average_searches'"
    ):
        seed_bootstrap([SeedPair("a", rows, broken)], METRICS)
    with pytest.raises(ValueError, match="a label is used twice"):
        seed_bootstrap([SeedPair("a", rows, rows), SeedPair("a", rows, rows)], METRICS)
