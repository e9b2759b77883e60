"""bench/fuzz_scoring.py on a small slice: fuzzed params and judgements never end in an untyped exception."""

from __future__ import annotations

from tests.bench_scripts import bench_script


def test_a_fuzz_slice_ends_only_in_rewards_or_typed_errors() -> None:
    fuzz = bench_script("fuzz_scoring")
    report = fuzz.fuzz(2000, seed=11)
    assert report.inputs == 2000
    assert report.crashes == 0, report.examples
    # the slice reaches both outcomes, so it exercises the rewards and not only the input checks
    assert report.scored > 200
    assert report.typed_errors > 200


def test_the_fuzz_counts_an_untyped_exception_with_an_example() -> None:
    fuzz = bench_script("fuzz_scoring")
    report = fuzz.Report()
    report.record(OverflowError("int too large to convert to float"), lambda: "score('search_r1', …)")
    report.record(fuzz.ScoringInputError("params.x", "bad"), lambda: "")
    assert (report.inputs, report.typed_errors, report.crashes) == (2, 1, 1)
    assert "OverflowError" in report.examples["OverflowError"]
