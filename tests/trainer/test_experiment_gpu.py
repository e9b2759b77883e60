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


@pytest.mark.slow
def test_the_smoke_runs_seed_pairs_on_a_split_and_pools_them(tmp_path: Path) -> None:
    """--smoke --seeds 2 --split: both arms trained per seed (the same seed within a pair), every trained model
    evaluated on the split's held-out questions, and the pooled two-level tables written (a few minutes here)."""
    from scoring.splits import split_questions

    corpus = _jsonl(
        tmp_path / "corpus.jsonl",
        [{"id": str(i), "contents": f"Town {i}\nTown {i} lies on river {i % 3}."} for i in range(30)],
    )
    rows: list[dict[str, object]] = [
        {
            "id": f"nq_{i}",
            "question": f"Which river is town {i} on?",
            "golden_answers": [f"river {i % 3}"],
            "metadata": {
                "data_source": "nq",
                "split": "train" if i < 10 else "test",
                "supporting_titles": [f"Town {i}"],
            },
        }
        for i in range(20)
    ]
    questions = _jsonl(tmp_path / "questions.jsonl", rows)
    split = split_questions(rows, held_out_size=5, anchors=["nq_12"], salt="smoke")
    split_file = tmp_path / "split.json"
    split_file.write_text(json.dumps(split.summary()), encoding="utf-8")
    work, out = tmp_path / "work", tmp_path / "out"
    common = [
        f"--split={split_file}",
        f"--work={work}",
        f"--out={out}",
        f"--corpus={corpus}",
        f"--questions={questions}",
    ]
    # the screen first, alone (as on a CPU beforehand), then the seed pairs train on its list without screening again
    assert _script().main(["--smoke", "--screen-only", *common]) == 0, (out / "log.txt").read_text()
    screen_yield = json.loads((out / "screen_yield.json").read_text())
    kept = (out / "train_questions.jsonl").read_text()
    assert screen_yield["kept"] == len(kept.splitlines()) and not (out / "seeds").exists()
    code = _script().main(["--smoke", "--seeds=2", *common])
    assert code == 0, (out / "log.txt").read_text()
    assert (out / "train_questions.jsonl").read_text() == kept
    assert (out / "log.txt").read_text().count("screen: ") == 1  # screened once
    assert json.loads((out / "experiment.json").read_text())["seeds"] == [0, 1]
    screened = [json.loads(line)["id"] for line in (out / "screen_questions.jsonl").read_text().splitlines()]
    assert screened and set(screened) <= set(
        split.train
    )  # the candidates come from the split's training pool
    for k in (0, 1):
        pair = out / "seeds" / str(k)
        configs = [
            json.loads((pair / "runs" / arm / "run_config.json").read_text())
            for arm in ("outcome", "process")
        ]
        assert [c["training"]["seed"] for c in configs] == [k, k]
        assert configs[0]["data"] == configs[1]["data"]  # same questions within a pair
        assert [c["reward"]["params"]["lambda_p"] for c in configs] == [0.0, 0.4]
        for arm in ("outcome", "process"):
            evaluated = [
                json.loads(line)["id"]
                for line in (pair / f"eval_trained_{arm}.jsonl").read_text().splitlines()
            ]
            assert evaluated == list(split.held_out)
            assert (pair / "runs" / arm / "metrics.jsonl").is_file()
    pooled = json.loads((out / "experiment-3.json").read_text())
    assert pooled["seeds_per_arm"] == 2 and pooled["eval_questions"] == 5 and pooled["min_steps_per_run"] == 2
    assert set(pooled["pairs"]) == {"0", "1"} and pooled["split"]["held_out"] == 5
    for name in ("average_searches", "redundant_search_rate", "cem", "em"):
        assert {"difference", "low", "high"} <= set(pooled["pooled"][name])


def test_a_split_naming_unknown_questions_is_refused_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _jsonl(tmp_path / "c.jsonl", [])
    questions = _jsonl(tmp_path / "q.jsonl", [{"id": "nq_1", "question": "q?", "golden_answers": ["x"]}])
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["nq_1"], "held_out": ["nq_1", "nq_9"]}))
    args = ["--smoke", f"--work={tmp_path / 'w'}", f"--out={tmp_path / 'o'}", f"--corpus={corpus}"]
    with pytest.raises(SystemExit):
        _script().main([*args, f"--questions={questions}", f"--split={split}"])
    assert f"--split {split}: 1 held_out ids not in --questions, e.g. 'nq_9'" in capsys.readouterr().err
    split.write_text("[]")
    with pytest.raises(SystemExit):
        _script().main([*args, f"--questions={questions}", f"--split={split}"])
    assert "not a split file with 'train' and 'held_out' ids" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
