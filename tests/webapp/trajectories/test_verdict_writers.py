"""Every place that writes a JudgeVerdict row names its judge version (none is left for the legacy migration)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
WRITERS = ("webapp", "bench", "trainer", "agent", "scoring")


def _verdict_constructions(tree: ast.AST) -> list[ast.Call]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "JudgeVerdict":
            found.append(node)
        # JudgeVerdict.objects.create(...) / get_or_create / update_or_create
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("create", "get_or_create", "update_or_create")
            and isinstance(func.value, ast.Attribute)
            and func.value.attr == "objects"
            and isinstance(func.value.value, ast.Name)
            and func.value.value.id == "JudgeVerdict"
        ):
            found.append(node)
    return found


def test_every_judge_verdict_written_outside_migrations_names_its_version():
    calls = []
    for folder in WRITERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            source = path.read_text(encoding="utf-8")
            if "JudgeVerdict" not in source:
                continue
            for call in _verdict_constructions(ast.parse(source)):
                names = {keyword.arg for keyword in call.keywords}
                calls.append((f"{path.relative_to(REPO)}:{call.lineno}", names))
    assert len(calls) >= 4  # trajectory_bulk_create, the demo's judge, re-judge, the audit benches
    missing = [where for where, names in calls if not names & {"version", "version_id"}]
    assert missing == [], f"JudgeVerdict rows written without a judge version at {missing}"
