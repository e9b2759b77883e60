"""bench/experiment_gpu.py's checks of its input (its --smoke run, every stage on a tiny model, and the import of its
bundle are tests/webapp/experiments/test_bundles.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench_scripts import bench_script

REPO = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    return bench_script("experiment_gpu")


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
