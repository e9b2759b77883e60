"""bench/experiment_gpu.py's CPU twin: every stage on a tiny random model, a tiny corpus and a few questions."""

from __future__ import annotations

import importlib.util
import json
import sys
import tarfile
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


@pytest.mark.slow
def test_the_smoke_run_trains_both_arms_and_returns_the_table_in_its_bundle(tmp_path: Path) -> None:
    corpus = _jsonl(
        tmp_path / "corpus.jsonl",
        [{"id": str(i), "contents": f"Town {i}\nTown {i} lies on river {i % 3}."} for i in range(30)],
    )
    questions = _jsonl(
        tmp_path / "questions.jsonl",
        [
            {
                "id": f"q{i}",
                "question": f"Which river is town {i} on?",
                "golden_answers": [f"river {i % 3}"],
                "metadata": {"split": "train" if i < 10 else "test", "supporting_titles": [f"Town {i}"]},
            }
            for i in range(16)
        ],
    )
    bundle = tmp_path / "results.tar.gz"

    folders = {"--work": tmp_path / "work", "--out": tmp_path / "out", "--bundle": bundle}
    files = {"--corpus": corpus, "--questions": questions}
    code = _script().main(["--smoke", *(f"{k}={v}" for k, v in {**folders, **files}.items())])

    assert code == 0
    result = json.loads((tmp_path / "out" / "table.json").read_text())
    assert set(result["rows"]) == {"start", "trained_outcome", "trained_process"}
    assert result["differences"]["trained_process − trained_outcome"]["questions"] == 6
    with tarfile.open(bundle) as archive:
        names = set(archive.getnames())
    assert {"out/table.md", "out/runs/process/metrics.jsonl", "out/runs/outcome/run_config.json"} <= names
    config = json.loads((tmp_path / "out" / "runs" / "process" / "run_config.json").read_text())
    assert config["reward"]["params"] == {"lambda_p": 0.4}  # the arms differ in λp alone
    baseline = json.loads((tmp_path / "out" / "runs" / "outcome" / "run_config.json").read_text())
    baseline["reward"]["params"] = config["reward"]["params"]
    baseline["output_dir"] = config["output_dir"]  # each arm's own folder and stop file
    baseline["training"]["stop_file"] = config["training"]["stop_file"]
    assert baseline == config


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
