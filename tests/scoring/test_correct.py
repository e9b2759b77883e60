"""scoring.correct: Rogan–Gladen's judge-corrected rate, its bootstrap intervals and its command line."""

from __future__ import annotations

import json
import random
import re

import pytest

from scoring.correct import AuditCounts, binomial, corrected_rate, main, multinomial, rogan_gladen


def _steps(tp: int, fp: int, fn: int, tn: int) -> list[AuditCounts]:
    """An audit where every step is its own cluster."""
    return (
        [AuditCounts(1, 0, 0, 0)] * tp
        + [AuditCounts(0, 1, 0, 0)] * fp
        + [AuditCounts(0, 0, 1, 0)] * fn
        + [AuditCounts(0, 0, 0, 1)] * tn
    )


def _run(positives: int, total: int) -> list[tuple[int, int]]:
    return [(1, 1)] * positives + [(0, 1)] * (total - positives)


@pytest.mark.parametrize(
    ("q", "se", "sp", "expected"),
    [
        (0.175, 0.85, 0.90, 0.10),  # q = se·θ + (1 − sp)(1 − θ) with θ = 0.10
        (0.5, 1.0, 1.0, 0.5),  # a perfect judge needs no correction
        (0.05, 0.85, 0.90, 0.0),  # below the false-positive floor 1 − sp: clipped to 0
        (0.99, 0.85, 0.90, 1.0),  # above the sensitivity ceiling: clipped to 1
    ],
)
def test_it_corrects_a_raw_rate_by_rogan_gladen(q: float, se: float, sp: float, expected: float) -> None:
    assert rogan_gladen(q, se, sp) == pytest.approx(expected)


def test_it_refuses_a_judge_no_better_than_chance() -> None:
    with pytest.raises(ValueError, match=r"se \+ sp <= 1"):
        rogan_gladen(0.3, 0.5, 0.5)


def test_it_gives_the_point_estimate_inside_both_intervals() -> None:
    result = corrected_rate(_run(175, 1000), _steps(85, 10, 15, 90), n_boot=500)
    assert result.raw == pytest.approx(0.175)
    assert result.sensitivity == pytest.approx(85 / 100)
    assert result.specificity == pytest.approx(90 / 100)
    assert result.corrected == pytest.approx(rogan_gladen(0.175, 0.85, 0.90))
    assert result.reason is None
    assert result.low is not None and result.high is not None
    assert result.low <= result.corrected <= result.high
    assert result.raw_low is not None and result.raw_high is not None
    assert result.raw_low <= 0.175 <= result.raw_high
    # The corrected interval carries the audit's uncertainty as well, so it is wider than the raw one.
    assert result.high - result.low > result.raw_high - result.raw_low


def test_it_is_deterministic_for_a_seed_and_varies_with_it() -> None:
    run, audit = _run(60, 300), _steps(30, 6, 8, 120)
    first = corrected_rate(run, audit, n_boot=300, seed=3)
    assert corrected_rate(run, audit, n_boot=300, seed=3) == first
    assert corrected_rate(run, audit, n_boot=300, seed=4).low != first.low


def test_it_resamples_whole_trajectories() -> None:
    # The same steps, once as 40 clusters of 5 identical steps and once as 200 single steps: clustering widens.
    clustered = [AuditCounts(5, 0, 0, 0)] * 8 + [AuditCounts(0, 5, 0, 0)] * 4 + [AuditCounts(0, 0, 0, 5)] * 28
    single = _steps(40, 20, 0, 140)
    run = _run(100, 400)
    wide = corrected_rate(run, clustered, n_boot=800)
    narrow = corrected_rate(run, single, n_boot=800)
    assert wide.corrected == pytest.approx(narrow.corrected)
    assert (
        wide.low is not None and wide.high is not None and narrow.low is not None and narrow.high is not None
    )
    assert wide.high - wide.low > narrow.high - narrow.low


def test_it_weights_audit_clusters_horvitz_thompson() -> None:
    audit = [
        AuditCounts(1, 0, 0, 0),
        AuditCounts(0, 0, 1, 0),
        AuditCounts(0, 0, 0, 1),
        AuditCounts(0, 1, 0, 0),
    ]
    weighted = corrected_rate(_run(30, 100), audit, weights=[1.0, 3.0, 2.0, 2.0], n_boot=50)
    assert weighted.sensitivity == pytest.approx(1 / 4)  # tp weight 1 over tp + fn weight 4
    assert weighted.specificity == pytest.approx(2 / 4)
    # A common factor of every weight changes nothing.
    base = corrected_rate(_run(30, 100), _steps(5, 2, 1, 12), n_boot=50)
    scaled = corrected_rate(_run(30, 100), _steps(5, 2, 1, 12), weights=[7.0] * 20, n_boot=50)
    assert scaled.sensitivity == pytest.approx(base.sensitivity)
    assert scaled.corrected == pytest.approx(base.corrected)


@pytest.mark.parametrize(
    ("audit", "reason"),
    [
        ([], "no labels"),  # nothing audited for this detector
        ([AuditCounts(0, 0, 0, 0)], "no labels"),  # clusters without a labelled step
        (_steps(0, 2, 0, 10), "sensitivity is undefined"),  # humans flag nothing
        (_steps(3, 0, 2, 0), "specificity is undefined"),  # humans flag everything
        (_steps(2, 5, 3, 5), r"se \+ sp <= 1"),  # se 0.4 + sp 0.5
    ],
)
def test_it_says_why_there_is_no_corrected_rate(audit: list[AuditCounts], reason: str) -> None:
    result = corrected_rate(_run(10, 50), audit, n_boot=50)
    assert result.corrected is None and result.low is None and result.high is None
    assert result.reason is not None
    assert re.search(reason, result.reason)
    assert result.raw == pytest.approx(0.2)  # the raw rate is still there


def test_it_says_so_when_the_run_has_no_judged_steps() -> None:
    result = corrected_rate([], _steps(5, 1, 1, 5), n_boot=20)
    assert result.raw is None and result.corrected is None
    assert result.reason == "the run has no judged steps for this detector"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"run": [(3, 2)]}, r"run\[0\] has 3 positives over 2 steps"),
        ({"run": [(1, 2), (-1, 2)]}, r"run\[1\]"),
        ({"audit": [AuditCounts(1, -1, 0, 0)]}, r"audit\[0\]\.fp"),
        ({"weights": [1.0]}, "weights has 1 entries"),
        ({"weights": [1.0, 0.0]}, r"weights\[1\]"),
        ({"level": 1.0}, "level"),
        ({"n_boot": 0}, "n_boot"),
    ],
)
def test_it_names_the_bad_input(kwargs: dict[str, object], message: str) -> None:
    call: dict[str, object] = {"run": [(1, 2)], "audit": [AuditCounts(1, 0, 0, 1), AuditCounts(0, 0, 1, 1)]}
    call |= kwargs
    with pytest.raises(ValueError, match=message):
        corrected_rate(call.pop("run"), call.pop("audit"), **call)  # type: ignore[arg-type]


def test_its_multinomial_draws_every_cluster_once_per_draw() -> None:
    rng = random.Random(0)
    for _ in range(200):
        drawn = multinomial(rng, 50, [10, 0, 25, 15])
        assert sum(drawn) == 50 and drawn[1] == 0 and min(drawn) >= 0


@pytest.mark.parametrize(("n", "p"), [(40, 0.1), (5000, 0.3), (3000, 0.8)])
def test_its_binomial_has_the_right_mean(n: int, p: float) -> None:
    rng = random.Random(1)
    draws = [binomial(rng, n, p) for _ in range(4000)]
    mean = sum(draws) / len(draws)
    assert all(0 <= d <= n for d in draws)
    assert abs(mean - n * p) < 4 * (n * p * (1 - p) / len(draws)) ** 0.5


def test_its_command_line_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--positives", "352", "--total", "500", "--tp", "40", "--fp", "12", "--fn", "5", "--tn", "143"]
    assert main([*argv, "--json", "--n-boot", "300"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"raw", "corrected", "low", "high", "sensitivity", "specificity"} <= out.keys()
    assert out["raw"] == pytest.approx(0.704)
    assert out["sensitivity"] == pytest.approx(40 / 45)
    assert out["corrected"] == pytest.approx(rogan_gladen(0.704, 40 / 45, 143 / 155))
    assert out["low"] < out["corrected"] < out["high"]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--positives", "600", "--total", "500"], "--positives"),  # more positives than steps
        (["--positives", "-1", "--total", "500"], "--positives"),  # negative
        (["--positives", "0", "--total", "0"], "--total"),  # no judged steps
        (["--tp", "0", "--fp", "0", "--fn", "0", "--tn", "0"], "audit is empty"),
        (["--tp", "0", "--fn", "0"], "--tp + --fn"),  # sensitivity undefined
        (["--tp", "2", "--fn", "8", "--tn", "5", "--fp", "5"], "se + sp <= 1"),
        (["--fn", "-2"], "--fn"),
    ],
)
def test_its_command_line_rejects_bad_counts_with_exit_2(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    defaults = {"--positives": "10", "--total": "100", "--tp": "8", "--fp": "2", "--fn": "2", "--tn": "8"}
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        defaults[flag] = value
    with pytest.raises(SystemExit) as exited:
        main([item for pair in defaults.items() for item in pair])
    assert exited.value.code == 2
    assert named in capsys.readouterr().err
