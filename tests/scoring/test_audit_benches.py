"""bench/correction_coverage.py and bench/stratified_audit.py on small settings: what they print holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench_scripts import bench_script


def test_the_coverage_bench_corrects_what_the_raw_rate_misses(tmp_path: Path) -> None:
    bench = bench_script("correction_coverage")
    out = tmp_path / "coverage.json"
    assert bench.main(["--sims", "40", "--n-boot", "200", "--scenario", "moderate", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    # θ = 0.10 with se 0.85, sp 0.90: the judge's raw rate is about 0.175, so its interval misses θ every time.
    assert row["expected_raw"] == pytest.approx(0.175)
    assert row["raw_coverage"] < 0.1
    assert (
        row["corrected_coverage"] >= 0.85
    )  # 40 simulations: loose, the 1,000-run figure is in docs/audits.md
    assert abs(row["bias"]) < 0.01


def test_the_stratified_bench_is_unbiased_only_with_weights(tmp_path: Path) -> None:
    bench = bench_script("stratified_audit")
    out = tmp_path / "stratified.json"
    assert bench.main(["--draws", "150", "--population", "1500", "--json", str(out)]) == 0
    rows = {(row["design"], row["statistic"]): row for row in json.loads(out.read_text())}
    weighted = rows[("stratified, weighted", "accuracy")]
    unweighted = rows[("stratified, unweighted", "accuracy")]
    assert abs(weighted["mean_error_points"]) < 1.0
    assert unweighted["mean_error_points"] < -2.0  # the over-sampled flagged stratum is where the judge errs
