"""scoring.splits: Experiment #3's seeded split of one source, and bench/experiment3_split.py's committed split."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scoring.splits import ECHO, echo, hash_unit, split_questions, training_exclusion
from tests.bench_scripts import bench_script
from tests.conftest import shared_dir


def row(qid: str, question: str, golds: list[str], source: str = "nq") -> dict[str, Any]:
    return {"id": qid, "question": question, "golden_answers": golds, "metadata": {"data_source": source}}


def rows_of(n: int) -> list[dict[str, Any]]:
    return [row(f"nq_{i}", f"who wrote book number {i}", [f"Author {i}"]) for i in range(n)]


def test_the_hash_depends_on_salt_and_id_only() -> None:
    assert hash_unit("a", "x") == hash_unit("a", "x")
    assert hash_unit("a", "x") != hash_unit("b", "x")
    values = [hash_unit("s", f"q{i}") for i in range(2000)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert 0.45 < sum(values) / len(values) < 0.55  # spread over [0, 1)


def test_guessable_and_echo_questions_are_named() -> None:
    assert training_exclusion("is paris in france", ["yes"]) == "yes/no"
    assert training_exclusion("who was born first, ann or bea", ["Bea"]) == "named option"
    assert training_exclusion("who sang photograph by ringo starr", ["Ringo Starr", "George"]) == ECHO
    assert echo("when did the us join ww2", ["1941", "us"])  # one gold inside the question is enough
    assert training_exclusion("who wrote hamlet", ["Shakespeare"]) is None


def test_the_split_holds_the_anchors_and_the_lowest_hashes() -> None:
    rows = [*rows_of(50), row("hp_1", "other source", ["x"], source="hotpotqa")]
    anchors = ["nq_3", "nq_40"]
    split = split_questions(rows, held_out_size=20, anchors=anchors, salt="s")
    assert split.n_source == 50 and len(split.held_out) == 20
    assert set(anchors) <= set(split.held_out)
    others = sorted(
        (f"nq_{i}" for i in range(50) if f"nq_{i}" not in anchors), key=lambda q: hash_unit("s", q)
    )
    assert set(split.held_out) == set(anchors) | set(others[:18])
    assert set(split.train) == set(others[18:]) and not set(split.train) & set(split.held_out)
    assert "hp_1" not in split.held_out + split.train
    # file order, whatever order the rows came in: the split depends on ids and salt only
    again = split_questions(list(reversed(rows)), held_out_size=20, anchors=anchors, salt="s")
    assert set(again.held_out) == set(split.held_out) and set(again.train) == set(split.train)
    assert split_questions(rows, held_out_size=20, anchors=anchors, salt="t").held_out != split.held_out


def test_guessable_and_echo_questions_stay_out_of_training_but_in_the_held_out_set() -> None:
    rows = [
        *rows_of(30),
        row("nq_yes", "is the sky blue", ["yes"]),
        row("nq_echo", "who sang photograph by ringo starr", ["Ringo Starr", "the Beatles"]),
    ]
    split = split_questions(rows, held_out_size=2, anchors=["nq_yes"], salt="s")
    assert "nq_yes" in split.held_out and split.held_out_excludable == {"yes/no": 1}
    assert "nq_echo" not in split.train and split.left_out == {ECHO: ("nq_echo",)}
    assert len(split.train) == 32 - 2 - 1
    counts = split.summary()["counts"]
    assert counts["left_out_of_training"] == {ECHO: 1} and counts["train"] == 29


@pytest.mark.parametrize(
    ("rows", "kwargs", "message"),
    [
        (
            [{"id": "a", "question": "q", "metadata": {"data_source": "nq"}}],
            {},
            "row 0: no field 'golden_answers'",
        ),
        ([row("a", "q", "gold")], {}, "row 0 (a): field 'golden_answers' must be a list"),
        ([row("a", "q", ["g"]), row("a", "q", ["g"])], {}, "row 1: duplicate id 'a'"),
        (rows_of(3), {"anchors": ["nq_9"]}, "anchors: 1 not among the nq questions"),
        (rows_of(3), {"held_out_size": 4}, "held_out_size must lie between"),
        (rows_of(3), {"held_out_size": 1, "anchors": ["nq_0", "nq_1"]}, "held_out_size must lie between"),
    ],
)
def test_bad_input_is_named(rows: list[dict[str, Any]], kwargs: dict[str, Any], message: str) -> None:
    kwargs.setdefault("held_out_size", 1)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        split_questions(rows, **kwargs)


def test_the_committed_split_is_what_the_script_gives(tmp_path: Any) -> None:
    questions = shared_dir() / "data" / "wiki_multihop" / "questions.jsonl"
    if not questions.is_file():
        pytest.skip(f"{questions} not found (set SEARCHLAB_SHARED_DIR)")
    script = bench_script("experiment3_split")
    assert script.main(["--questions", str(questions), "--check", "--rows", str(tmp_path)]) == 0
    data = json.loads(script.OUT.read_text(encoding="utf-8"))
    counts = data["counts"]
    assert counts["source"] == 2676 and counts["held_out"] >= 1000 and counts["anchors"] == 200
    assert data["anchors"] == script.bundle_eval_ids(script.BUNDLE)
    assert set(data["anchors"]) <= set(data["held_out"])
    assert counts["train"] + counts["held_out"] + sum(counts["left_out_of_training"].values()) == 2676
    assert data["anchors_are"].startswith("the first 200 questions of the test split")
    held = [json.loads(line) for line in (tmp_path / "held_out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in held] == data["held_out"]
    train = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert all(training_exclusion(r["question"], r["golden_answers"]) is None for r in train)
