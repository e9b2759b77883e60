"""The reference harness: every vector of ../shared/reference passes, and the harness itself fails honestly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoring import verify_reference
from scoring.verify_reference import check_record, difference


def test_it_passes_every_reference_vector(reference_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = verify_reference.main([str(reference_dir)])
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    passed = int(last.split()[0])
    assert last.endswith(" passed, 0 failed"), out[-4000:]
    assert passed == sum(1 for p in reference_dir.glob("*.jsonl") for line in p.open() if line.strip())
    assert status == 0


def _identity(record_input: dict[str, object]) -> object:
    return record_input["x"]


def _raise_key_error(record_input: dict[str, object]) -> object:
    raise KeyError("unknown question")


ADAPTERS = {"id": _identity, "boom": _raise_key_error}


@pytest.mark.parametrize(
    ("record", "approximate", "failed"),
    [
        # a function we don't implement fails; it is never skipped
        pytest.param(
            {"fn": "nope", "input": {}, "output": 1}, frozenset(), "not implemented", id="unknown-fn"
        ),
        # a bool is not an int, even though True == 1 in Python
        pytest.param(
            {"fn": "id", "input": {"x": 1}, "output": True}, frozenset(), "expected True", id="bool-vs-int"
        ),
        # ints and floats compare numerically (Search-R1 returns 1, FlashRAG 1.0)
        pytest.param({"fn": "id", "input": {"x": 1}, "output": 1.0}, frozenset(), None, id="int-vs-float"),
        # exact comparison unless the fn is listed as approximate (float32 sources)
        pytest.param(
            {"fn": "id", "input": {"x": 0.1000001}, "output": 0.1}, frozenset(), "expected", id="exact"
        ),
        pytest.param(
            {"fn": "id", "input": {"x": 0.10000001}, "output": 0.1}, frozenset({"id"}), None, id="approx"
        ),
        # the vectors spell non-finite floats as strings
        pytest.param(
            {"fn": "id", "input": {"x": float("nan")}, "output": "NaN"}, frozenset(), None, id="nan"
        ),
        # a recorded reference error is matched by exception type name
        pytest.param(
            {"fn": "boom", "input": {}, "output": {"error": "KeyError: 'x'"}}, frozenset(), None, id="error"
        ),
        pytest.param(
            {"fn": "boom", "input": {}, "output": {"error": "ValueError: x"}},
            frozenset(),
            "raised KeyError",
            id="wrong-error",
        ),
        # a value where the reference raised is a failure
        pytest.param(
            {"fn": "id", "input": {"x": 3}, "output": {"error": "KeyError: 'x'"}},
            frozenset(),
            "expected the",
            id="no-raise",
        ),
        pytest.param(
            {"fn": "id", "input": {"x": [1, 2]}, "output": [1, 2, 3]}, frozenset(), "3 items", id="length"
        ),
        pytest.param({"fn": "id", "output": 1}, frozenset(), "malformed", id="malformed"),
    ],
)
def test_it_checks_records(
    record: dict[str, object], approximate: frozenset[str], failed: str | None
) -> None:
    reason = check_record(record, ADAPTERS, approximate)
    if failed is None:
        assert reason is None
    else:
        assert reason is not None and failed in reason


def test_it_names_the_path_of_a_nested_difference() -> None:
    assert (
        difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}, approximate=False)
        == "$.a[1].b: expected 2, got 3"
    )


def test_it_counts_an_empty_directory_as_a_failure(tmp_path: Path) -> None:
    assert verify_reference.main([str(tmp_path)]) == 1


def test_the_tiresrag_generate_adapter_returns_prompts_under_the_documented_names(
    reference_dir: Path,
) -> None:
    """reference/README.md: `sufficiency_messages`, `thinking_user_prompts` (rendered user prompts; the system
    prompt is in prompts/) and `sampling_params` when a `generate` record asks for `return_prompts`."""
    from scoring.conformance.tiresrag import _generate

    lines = (reference_dir / "tiresrag_reward.jsonl").read_text(encoding="utf-8").splitlines()
    record = next(
        r for r in map(json.loads, lines) if r["fn"].endswith("sufficient_thinking_reward.generate")
    )
    output = _generate({**record["input"], "return_prompts": True})

    assert {"sufficiency_messages", "thinking_user_prompts", "sampling_params"} <= set(output)
    assert "thinking_messages" not in output
    [prompt] = output["thinking_user_prompts"]
    assert isinstance(prompt, str) and record["input"]["data"][0]["question"] in prompt
    assert output["sufficiency_messages"][0][-1]["role"] == "user"
