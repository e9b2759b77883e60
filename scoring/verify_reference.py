"""Check our reference-compatible variants against the released code's test vectors.

    python -m scoring.verify_reference ../shared/reference

runs every record of every ``*.jsonl`` file in the directory and prints ``N passed, M failed`` and each failure.
A record whose function we do not implement counts as failed, not skipped. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scoring.conformance import Adapter

# One module per vector file family; each exports ADAPTERS (fn id -> adapter) and optionally APPROXIMATE.
ADAPTER_MODULES = (
    "scoring.conformance.metrics",
    "scoring.conformance.searchr1",
    "scoring.conformance.rollout",
    "scoring.conformance.hiprag",
    "scoring.conformance.autosearch",
    "scoring.conformance.tiresrag",
    "scoring.conformance.searchp1",
    "scoring.conformance.aggregates",
)
RELATIVE_TOLERANCE = 1e-6
ABSOLUTE_TOLERANCE = 1e-9  # float32 values near zero


@dataclass(frozen=True, slots=True)
class Failure:
    file: str
    line: int
    fn: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.fn}: {self.reason}"


def load_adapters() -> tuple[dict[str, Adapter], frozenset[str]]:
    adapters: dict[str, Adapter] = {}
    approximate: set[str] = set()
    for name in ADAPTER_MODULES:
        module = importlib.import_module(name)
        adapters.update(module.ADAPTERS)
        approximate.update(getattr(module, "APPROXIMATE", ()))
    return adapters, frozenset(approximate)


def _as_float(value: Any) -> float | None:
    """JSON numbers, and the strings the vectors use for non-finite floats."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if value in ("NaN", "Infinity", "-Infinity"):
        return float(value)
    return None


def difference(expected: Any, actual: Any, approximate: bool, path: str = "$") -> str | None:
    """Where ``actual`` differs from ``expected`` (a JSON value), or None when they match."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        if type(expected) is not type(actual) or expected != actual:
            return f"{path}: expected {expected!r}, got {actual!r}"
        return None
    exp_f, act_f = _as_float(expected), _as_float(actual)
    if (
        exp_f is not None
        and act_f is not None
        and not (isinstance(expected, str) and isinstance(actual, str))
    ):
        if math.isnan(exp_f) and math.isnan(act_f):
            return None
        if exp_f == act_f:
            return None
        if approximate and math.isclose(exp_f, act_f, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE):
            return None
        return f"{path}: expected {expected!r}, got {actual!r}"
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return f"{path}: expected an object, got {actual!r}"
        if set(expected) != set(actual):
            return f"{path}: keys differ: missing {sorted(set(expected) - set(actual))}, extra {sorted(set(actual) - set(expected))}"
        for key in expected:
            found = difference(expected[key], actual[key], approximate, f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list | tuple):
            return f"{path}: expected a list, got {actual!r}"
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            found = difference(e, a, approximate, f"{path}[{i}]")
            if found:
                return found
        return None
    if expected != actual:
        return f"{path}: expected {expected!r}, got {actual!r}"
    return None


def _expected_error(output: Any) -> str | None:
    if isinstance(output, Mapping) and set(output) == {"error"} and isinstance(output["error"], str):
        return output["error"].split(":", 1)[0]
    return None


def check_record(
    record: Mapping[str, Any], adapters: Mapping[str, Adapter], approximate: frozenset[str]
) -> str | None:
    """Run one record; return why it failed, or None when it passed."""
    fn = record.get("fn")
    if not isinstance(fn, str) or "input" not in record or "output" not in record:
        return "malformed record: needs string 'fn', 'input' and 'output'"
    adapter = adapters.get(fn)
    if adapter is None:
        return "not implemented"
    expected = record["output"]
    error_type = _expected_error(expected)
    try:
        actual = adapter(record["input"])
    except Exception as exc:
        if error_type is not None and type(exc).__name__ == error_type:
            return None
        return f"raised {type(exc).__name__}: {exc}"
    if error_type is not None:
        return f"expected the reference's {error_type}, got {actual!r}"
    return difference(expected, actual, fn in approximate)


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield line_number, json.loads(line)
                except json.JSONDecodeError as exc:
                    yield line_number, {"fn": "<unreadable>", "error": str(exc)}


def verify_directory(directory: Path) -> tuple[int, list[Failure]]:
    adapters, approximate = load_adapters()
    passed = 0
    failures: list[Failure] = []
    for path in sorted(directory.glob("*.jsonl")):
        for line_number, record in _records(path):
            reason = check_record(record, adapters, approximate)
            if reason is None:
                passed += 1
            else:
                failures.append(Failure(path.name, line_number, str(record.get("fn")), reason))
    return passed, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("directory", type=Path, help="a folder of *.jsonl vector files")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        parser.error(f"{args.directory} is not a directory")
    passed, failures = verify_directory(args.directory)
    for failure in failures:
        print(f"FAILED {failure}")
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
