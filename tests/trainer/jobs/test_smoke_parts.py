"""The prepared GPU command's screen path on the CPU with the tiny model: the screen in two parts (each its own
``--screen-only --screen-part K/2`` run, as on two machines), their ``screen_part.json`` files combined by
``--screen-parts``, and the experiment trained and evaluated on that list without screening again."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, shared_dir
from trainer.jobs.__main__ import main

SPLIT = REPO_ROOT / "demo" / "experiment3_split.json"


@pytest.mark.slow
def test_two_screen_parts_made_apart_train_the_experiment_without_a_screen(tmp_path: Path) -> None:
    data = shared_dir() / "data" / "wiki_multihop"
    if not (data / "questions.jsonl").is_file():
        pytest.skip(f"the wiki_multihop questions are not at {data}")
    corpus = tmp_path / "corpus.jsonl"  # a slice: retrieval works, the index builds in seconds
    with (data / "corpus.jsonl").open(encoding="utf-8") as source:
        corpus.write_text("".join(itertools.islice(source, 2000)), encoding="utf-8")
    args = ["experiment", "--smoke", f"--split={SPLIT}", f"--work={tmp_path / 'work'}"]
    args += [f"--corpus={corpus}", f"--questions={data / 'questions.jsonl'}"]
    parts = tmp_path / "parts"
    parts.mkdir()
    ids: list[str] = []
    for k in (1, 2):
        out = tmp_path / f"part-{k}"
        assert main([*args, f"--out={out}", "--screen-only", f"--screen-part={k}/2"]) == 0, (
            out / "log.txt"
        ).read_text()
        assert not (out / "questions" / "train.jsonl").exists()  # a part is not the experiment's list
        part = json.loads((out / "screen_part.json").read_text(encoding="utf-8"))
        assert (part["part"], part["of"], part["pool"]) == (k, 2, 8) and len(part["ids"]) == 4
        ids += part["ids"]
        (parts / f"part-{k}-of-2.json").write_bytes((out / "screen_part.json").read_bytes())

    out = tmp_path / "out"
    assert main([*args, f"--out={out}", f"--screen-parts={parts}"]) == 0, (out / "log.txt").read_text()
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "finished"
    train = [
        json.loads(line)["id"]
        for line in (out / "questions" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert train == ids  # --smoke keeps every candidate: both parts, in list order
    stages = sorted(p.name for p in (out / "stages").iterdir())
    assert not [s for s in stages if s.startswith("screen-")]  # the parts' screen, not one here
    assert {"train-outcome-s0", "train-process-s0", "eval-outcome-s0", "eval-process-s0"} <= set(stages)
    assert json.loads((out / "screen_yield.json").read_text(encoding="utf-8"))["parts"] == [1, 2]
