"""Questions answerable without evidence (scoring.guessable): the rule, and what it finds in wiki_multihop."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from scoring.guessable import NAMED_OPTION, YES_NO, guessable
from tests.conftest import shared_dir


@pytest.mark.parametrize(
    ("question", "golds", "kind"),
    [
        ("Do Bobbie Eakes and Omar Fraile share the same nationality?", ["no"], YES_NO),
        ("Are both Meydan, Fars and Yaghleh Mazeh located in the same country?", ["Yes."], YES_NO),
        ("Who was born first out of Arthur Schneider and Julien Cardy?", ["Arthur Schneider"], NAMED_OPTION),
        ("Which film came out earlier, Thiruda Thiruda or Sikuru Hathe?", "Thiruda Thiruda", NAMED_OPTION),
        # every gold must be named: a question naming one alias of many is usually a real question
        ("who wrote the song photograph by ringo starr", ["George Harrison", "Ringo Starr"], None),
        # whole words only: "Ann" is not named in "Annapolis"
        ("Which city is the capital of Maryland, Annapolis?", ["Ann"], None),
        ("Who directed the film The Feud (1919)?", ["Fred Kelsey"], None),
        ("Where was the director of Seenu born?", [], None),
    ],
)
def test_guessable_names_why(question: str, golds: list[str] | str, kind: str | None) -> None:
    assert guessable(question, golds) == kind


def test_the_train_split_is_full_of_guessable_questions_and_the_test_split_is_not() -> None:
    """The figures scoring.guessable's docstring and docs/experiment.md quote (Experiment #2's lesson)."""
    path = shared_dir() / "data" / "wiki_multihop" / "questions.jsonl"
    counts: Counter[tuple[str, str | None]] = Counter()
    totals: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        split = str(row["metadata"]["split"])
        totals[split] += 1
        counts[split, guessable(row["question"], row["golden_answers"])] += 1
    assert (totals["train"], counts["train", YES_NO], counts["train", NAMED_OPTION]) == (700, 176, 94)
    assert (totals["test"], counts["test", YES_NO], counts["test", NAMED_OPTION]) == (2676, 1, 17)
