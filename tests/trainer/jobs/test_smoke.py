"""The CPU smoke end to end (issue 35's "the same commands end to end on the CPU with the tiny model"): the screen
alone first, then 2 seed pairs on demo/experiment3_split.json, the spool checked against its contract
(docs/experiment.md, "The experiment spool"), then a resumed run that redoes only the stage that went missing."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, shared_dir
from trainer.jobs.__main__ import main

SPLIT = REPO_ROOT / "demo" / "experiment3_split.json"
RECORD_FIELDS = {
    "id", "question", "golden_answers", "answer", "cem", "em", "f1", "format_ok", "n_searches",
    "over_search", "under_search", "reward", "text", "format", "verdicts",
}  # fmt: skip
EVALUATION_FIELDS = {
    "format", "version", "role", "method", "arm", "seed", "sample", "model", "temperature", "questions",
    "started_at", "finished_at", "status", "error", "seconds",
}  # fmt: skip


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def spool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    data = shared_dir() / "data" / "wiki_multihop"
    if not (data / "questions.jsonl").is_file():
        pytest.skip(f"the wiki_multihop questions are not at {data}")
    root = tmp_path_factory.mktemp("smoke")
    corpus = root / "corpus.jsonl"  # a slice: retrieval works, the index builds in seconds
    with (data / "corpus.jsonl").open(encoding="utf-8") as source:
        corpus.write_text("".join(itertools.islice(source, 2000)), encoding="utf-8")
    args = ["experiment", "--smoke", f"--split={SPLIT}", f"--work={root / 'work'}", f"--out={root / 'out'}"]
    args += [f"--corpus={corpus}", f"--questions={data / 'questions.jsonl'}"]
    assert main([*args, "--screen-only"]) == 0, (root / "out" / "log.txt").read_text()
    assert not (root / "out" / "stages" / "train-outcome-s0").exists()
    assert main([*args, "--seeds=2"]) == 0, (root / "out" / "log.txt").read_text()
    return root / "out", args


@pytest.mark.slow
def test_the_smoke_writes_a_complete_spool(spool: tuple[Path, list[str]]) -> None:
    out, _ = spool
    manifest = _json(out / "manifest.json")
    assert manifest["format"] == "searchlab-experiment-spool" and manifest["status"] == "finished"
    assert (
        manifest["seeds"] == [0, 1] and manifest["baseline"] == "outcome" and manifest["judge"] == "evidence"
    )
    assert [a["params"] for a in manifest["arms"]] == [{"lambda_p": 0.0}, {"lambda_p": 0.4}]
    assert (
        manifest["split"]["file"].endswith("experiment3_split.json")
        and len(manifest["split"]["sha256"]) == 64
    )
    assert set(manifest["phases"]) == {"base_model", "warm_start", "screen", "start_eval", "training", "eval"}
    assert manifest["finished_at"] and manifest["device"] == "cpu"
    assert "corpus_sha256" in _json(out / "index_metadata.json")
    assert (out / "warm_start" / "config.json").is_file() and (out / "warm_start" / "log.txt").is_file()
    split = _json(SPLIT)
    candidates = [r["id"] for r in _lines(out / "questions" / "candidates.jsonl")]
    assert candidates and set(candidates) <= set(split["train"])  # the split's training pool
    assert _json(out / "screen_yield.json")["kept"] == len(_lines(out / "questions" / "train.jsonl"))
    held_out = [r["id"] for r in _lines(out / "questions" / "eval.jsonl")]
    assert held_out == split["held_out"][:6]
    stages = sorted(p.name for p in (out / "stages").iterdir())
    trained = [
        f"{kind}-{arm}-s{k}" for kind in ("eval", "train") for arm in ("outcome", "process") for k in (0, 1)
    ]
    assert stages == sorted(["screen-1", "screen-2", "screen-3", "start-hiprag", *trained])
    for name in stages:
        if name.startswith("train-"):
            continue
        stage = _json(out / "stages" / name / "manifest.json")
        assert set(stage) == EVALUATION_FIELDS and stage["status"] == "finished"
        records = _lines(out / "stages" / name / "records.jsonl")
        assert records and all(set(r) == RECORD_FIELDS and r["format"] == "hiprag" for r in records)
        if name.startswith("eval-"):
            assert [r["id"] for r in records] == held_out and stage["role"] == "eval"
    assert "## Over 2 seed pairs: process − outcome" in (out / "result.md").read_text()
    assert _json(out / "result.json")["pooled"]["process"]["seeds_per_arm"] == 2


@pytest.mark.slow
def test_each_training_stage_is_a_run_spool(spool: tuple[Path, list[str]]) -> None:
    out, _ = spool
    for arm, k in itertools.product(("outcome", "process"), (0, 1)):
        stage = out / "stages" / f"train-{arm}-s{k}"
        manifest = _json(stage / "manifest.json")
        assert manifest["format"] == "searchlab-spool" and manifest["exit_code"] == 0
        assert manifest["name"] == f"train · {arm} · seed {k}"
        assert manifest["config"]["training"]["seed"] == k
        assert manifest["config"]["reward"]["params"] == {"lambda_p": 0.0 if arm == "outcome" else 0.4}
        assert manifest["config"]["data"]["path"] == str(out / "questions" / "train.jsonl")
        batches = sorted(stage.glob("0*.json"))
        metrics = [row for path in batches for row in _json(path).get("metrics") or ()]
        assert {row["step"] for row in metrics} == {1, 2} and (stage / "trainer.log").is_file()
        timing = (stage / "timing.csv").read_text().splitlines()
        assert timing[0].startswith("step,step_seconds,load_seconds") and len(timing) == 3


@pytest.mark.slow
def test_a_resumed_run_redoes_only_what_is_missing(spool: tuple[Path, list[str]]) -> None:
    out, args = spool
    log = (out / "log.txt").read_text()
    assert log.count("screen-1: ") == 1 and "not screening again" in log  # screened once, by --screen-only
    identity = _json(out / "manifest.json")["id"]
    for path in (out / "stages" / "eval-process-s1").iterdir():
        path.unlink()
    (out / "log.txt").write_text("")
    assert main([*args, "--seeds=2"]) == 0
    again = (out / "log.txt").read_text()
    assert "eval-process-s1: 6 questions" in again
    assert "training train-" not in again and "start-hiprag:" not in again and "eval-outcome-s0:" not in again
    assert _json(out / "manifest.json")["id"] == identity
