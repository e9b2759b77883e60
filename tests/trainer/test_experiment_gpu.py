"""bench/experiment_gpu.py's checks of its input (its --smoke run, every stage on a tiny model, and the import of its
bundle are tests/webapp/experiments/test_bundles.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("experiment_gpu", REPO / "bench" / "experiment_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["experiment_gpu"] = module
    spec.loader.exec_module(module)
    return module


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_it_refuses_to_start_without_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _jsonl(tmp_path / "c.jsonl", [])
    with pytest.raises(SystemExit):
        _script().main(["--work", "w", "--out", "o", "--corpus", str(corpus), "--questions", str(corpus)])
    assert "--gguf FILE" in capsys.readouterr().err


def test_a_bad_question_file_is_refused_naming_its_line_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _jsonl(tmp_path / "c.jsonl", [])
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "q?", "golden_answers": ["x"]}\nnot json\n')

    with pytest.raises(SystemExit):
        _script().main(
            [
                "--smoke",
                f"--work={tmp_path / 'w'}",
                f"--out={tmp_path / 'o'}",
                f"--corpus={corpus}",
                f"--questions={questions}",
            ]
        )

    assert f"{questions}:2: not a FlashRAG question row" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
