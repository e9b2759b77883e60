"""A screen in parts (``--screen-part K/N``, each with ``--screen-only``, on its own machine or day) combined by a
later run (``--screen-parts``): the same training list as one whole screen with the same answers, each part checked
against the run's candidate list. No model: the screen's evaluation is scripted (``evaluation.evaluate_model``),
each question's answer right or wrong by its id and the sample's seed; the start model and the index are folders
that only name themselves as such."""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from trainer.jobs import evaluation
from trainer.jobs.__main__ import main
from trainer.jobs.plan import PlanError, parser, plan_from_args
from trainer.jobs.plan_checks import part_bounds
from trainer.jobs.runner import run_experiment

TRAIN = 10  # candidates in the pool


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _right(qid: str, seed: int) -> bool:
    return hashlib.sha256(f"{qid}:{seed}".encode()).digest()[0] % 2 == 0


def _scripted(stage: Any, rows: list[dict[str, Any]], *_: Any) -> list[dict[str, Any]]:
    """A record per question, right or wrong by its id and the sample's seed alone (not its place in the batch)."""
    return [
        {"id": r["id"], "cem": _right(str(r["id"]), stage.seed), "n_searches": 1, "format_ok": True}
        for r in rows
    ]


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(evaluation, "evaluate_model", _scripted)
    rows = [
        {"id": f"q{i}", "question": f"who made thing {i}?", "golden_answers": [f"maker {i}"]}
        | {"metadata": {"split": "train" if i < TRAIN else "test"}}
        for i in range(TRAIN + 2)
    ]
    _jsonl(tmp_path / "questions.jsonl", rows)
    _jsonl(tmp_path / "corpus.jsonl", [])
    (tmp_path / "start").mkdir()
    (tmp_path / "start" / "config.json").write_text("{}")
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "metadata.json").write_text("{}")
    return tmp_path


def _argv(root: Path, out: str, *more: str) -> list[str]:
    return [
        f"--work={root / 'work'}",
        f"--out={root / out}",
        f"--corpus={root / 'corpus.jsonl'}",
        f"--questions={root / 'questions.jsonl'}",
        f"--start-model={root / 'start'}",
        f"--index={root / 'index'}",
        f"--train-limit={TRAIN}",
        "--keep-guessable",
        "--screen-unscreened-share=0.25",
        "--screen-only",
        *more,
    ]


def _run(root: Path, out: str, *more: str) -> Path:
    code = run_experiment(plan_from_args(parser().parse_args(_argv(root, out, *more))))
    assert code == 0, (root / out / "log.txt").read_text()
    return root / out


def _part(root: Path, part: str, *more: str) -> Path:
    """Part ``K/N`` screened into its own spool, its screen_part.json copied to ``parts/part-K-of-N.json``."""
    k, n = part.split("/")
    out = _run(root, f"out-{k}-of-{n}", f"--screen-part={part}", *more)
    (root / "parts").mkdir(exist_ok=True)
    return Path(shutil.copy(out / "screen_part.json", root / "parts" / f"part-{k}-of-{n}.json"))


def _whole_passes(out: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sample in (1, 2, 3):
        for record in _lines(out / "stages" / f"screen-{sample}" / "records.jsonl"):
            counts[record["id"]] = counts.get(record["id"], 0) + int(record["cem"])
    return counts


@pytest.mark.parametrize("pool", [0, 1, 7, 10, 1646])
@pytest.mark.parametrize("of", [1, 2, 3, 7])
def test_the_parts_are_contiguous_in_order_and_differ_in_size_by_at_most_one(pool: int, of: int) -> None:
    bounds = [part_bounds(pool, k, of) for k in range(1, of + 1)]
    assert bounds[0][0] == 0 and bounds[-1][1] == pool
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [high - low for low, high in bounds]
    assert max(sizes) - min(sizes) <= 1


def test_parts_screened_apart_then_combined_make_the_whole_screens_list(setup: Path) -> None:
    whole = _run(setup, "whole")
    files = [_part(setup, part) for part in ("1/3", "2/3", "3/3")]
    first = _json(files[0])
    assert (first["part"], first["of"], first["pool"], first["samples"], first["seed"]) == (1, 3, TRAIN, 3, 0)
    assert [len(_json(f)["ids"]) for f in files] == [3, 3, 4]
    order = [r["id"] for r in _lines(whole / "questions" / "candidates.jsonl")]
    assert [qid for f in files for qid in _json(f)["ids"]] == order
    assert first["pool_sha256"] == hashlib.sha256("\n".join(order).encode()).hexdigest()
    passes = {qid: n for f in files for qid, n in _json(f)["passes"].items()}
    assert passes == _whole_passes(whole)
    for k in (1, 2, 3):  # a part leaves no list a training run would take for the whole one
        spool = setup / f"out-{k}-of-3"
        assert not (spool / "questions" / "train.jsonl").exists()
        assert not (spool / "questions" / "candidates.jsonl").exists()
        assert (spool / "questions" / f"train-part-{k}-of-3.jsonl").is_file()
        assert (spool / "stages" / f"screen-1-part-{k}-of-3" / "records.jsonl").is_file()

    combined = _run(setup, "combined", f"--screen-parts={setup / 'parts'}")
    for name in ("candidates.jsonl", "train.jsonl"):
        assert (combined / "questions" / name).read_text() == (whole / "questions" / name).read_text()
    assert not (combined / "stages").exists()  # nothing screened here
    yield_ = _json(combined / "screen_yield.json")
    assert yield_["parts"] == [1, 2, 3] and yield_["of"] == 3
    assert {k: v for k, v in yield_.items() if k not in ("parts", "of", "pool")} == _json(
        whole / "screen_yield.json"
    )
    assert "missing: none" in (combined / "log.txt").read_text()


def test_a_missing_part_is_allowed_and_reported(setup: Path) -> None:
    whole = _run(setup, "whole")
    _part(setup, "1/3")
    _part(setup, "3/3")
    combined = _run(setup, "combined", f"--screen-parts={setup / 'parts'}")
    order = [r["id"] for r in _lines(whole / "questions" / "candidates.jsonl")]
    present = order[:3] + order[6:]
    assert [r["id"] for r in _lines(combined / "questions" / "candidates.jsonl")] == present
    assert {r["id"] for r in _lines(combined / "questions" / "train.jsonl")} <= set(present)
    yield_ = _json(combined / "screen_yield.json")
    assert (yield_["parts"], yield_["of"], yield_["candidates"], yield_["pool"]) == ([1, 3], 3, 7, TRAIN)
    log = (combined / "log.txt").read_text()
    assert "parts 1, 3 of 3 combined (missing: 2), 7 of the pool's 10 candidates (70.0%" in log


def test_a_part_of_another_pool_is_refused_naming_its_file(setup: Path) -> None:
    _part(setup, "1/2")
    other = _part(setup, "2/2", "--train-limit=8")  # another list: 8 candidates
    plan = plan_from_args(parser().parse_args(_argv(setup, "combined", f"--screen-parts={setup / 'parts'}")))
    assert run_experiment(plan) == 1
    error = _json(setup / "combined" / "manifest.json")["error"]
    assert f"{other}: pool 8, but" in error  # the parts disagree with each other
    (setup / "parts" / "part-1-of-2.json").unlink()
    assert run_experiment(plan) == 1
    error = _json(setup / "combined" / "manifest.json")["error"]
    assert f"screen parts: {other}: from another candidate list (8 candidates" in error
    assert "this run's: 10" in error and not (setup / "combined" / "questions" / "train.jsonl").exists()


def test_a_part_file_without_a_field_or_twice_is_refused_naming_it(setup: Path) -> None:
    part = _part(setup, "1/2")
    again = setup / "parts" / "part-1-of-2-again.json"
    shutil.copy(part, again)
    plan = plan_from_args(parser().parse_args(_argv(setup, "combined", f"--screen-parts={setup / 'parts'}")))
    assert run_experiment(plan) == 1
    error = _json(setup / "combined" / "manifest.json")["error"]
    assert f"{part}: part 1 of 2 again (also {again})" in error  # sorted by name: "-again" first
    data = _json(part)
    del data["pool_sha256"]
    part.write_text(json.dumps(data))
    with pytest.raises(PlanError, match=f"--screen-parts {part}: no field 'pool_sha256'"):
        plan_from_args(parser().parse_args(_argv(setup, "o", f"--screen-parts={part}")))
    part.write_text("{not json")
    with pytest.raises(PlanError, match=f"--screen-parts {part}: not a screen part's JSON"):
        plan_from_args(parser().parse_args(_argv(setup, "o", f"--screen-parts={part}")))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--screen-part=1/2"], "--screen-part needs --screen-only"),
        (["--screen-only", "--screen-part=3/2"], "--screen-part '3/2': need 1 ≤ K ≤ N"),
        (["--screen-only", "--screen-part=0/2"], "--screen-part '0/2': need 1 ≤ K ≤ N"),
        (["--screen-only", "--screen-part=1/0"], "--screen-part '1/0': need 1 ≤ K ≤ N"),
        (["--screen-only", "--screen-part=2"], "--screen-part '2': K/N, part K of N"),
        (["--screen-parts=/nowhere"], "--screen-parts /nowhere: no such file or folder"),
    ],
)
def test_a_bad_part_setting_is_refused_naming_its_flag(
    setup: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    argv = [a for a in _argv(setup, "o") if a != "--screen-only"]
    with pytest.raises(SystemExit):
        main(["experiment", *argv, *flags])
    assert message in capsys.readouterr().err
    assert not (setup / "o").exists()
