"""Answer metrics: the two normalizers and EM / Sub-EM / CEM / F1 (REFERENCE.md §a)."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.metrics import (
    cover_exact_match,
    exact_match,
    flashrag_acc,
    normalize_answer,
    normalize_string,
    query_f1,
    substring_match,
    token_cover_match,
    token_f1,
)


@pytest.mark.parametrize(
    ("text", "squad", "hiprag"),
    [
        # SQuAD deletes punctuation; HiPRAG drops articles while the dots still separate words, so the last "a" goes
        pytest.param("U.S.A.", "usa", "u s", id="usa"),
        # SQuAD deletes the hyphen first so "the" is no longer a word; HiPRAG drops the article first
        pytest.param("the-end", "theend", "end", id="the-end"),
        pytest.param("Washington, D.C.", "washington dc", "washington d c", id="dc"),
        # Unicode punctuation and accents are not in string.punctuation: they survive both
        pytest.param("Ærø “quoted” — dash", "ærø “quoted” — dash", "ærø “quoted” — dash", id="unicode-punct"),
        pytest.param("¿Qué pasa?", "¿qué pasa", "¿qué pasa", id="inverted-question"),
        pytest.param("it’s", "it’s", "it’s", id="curly-apostrophe"),
        # articles are whole words only
        pytest.param("theatre", "theatre", "theatre", id="not-an-article"),
        pytest.param(
            "Anne of the Thousand Days", "anne of thousand days", "anne of thousand days", id="articles"
        ),
        pytest.param("the the the", "", "", id="only-articles"),
        # HiPRAG: "a.k.a." splits into a / k / a and both a's are articles
        pytest.param("a.k.a. the boss", "aka boss", "k boss", id="aka"),
        pytest.param(
            "  multiple   spaces\tand\nnewlines ", "multiple spaces and newlines", None, id="whitespace"
        ),
        pytest.param("$1,000,000", "1000000", "1 000 000", id="money"),
        pytest.param("", "", "", id="empty"),
    ],
)
def test_it_normalizes_like_the_reference(text: str, squad: str, hiprag: str | None) -> None:
    assert normalize_answer(text) == squad
    if hiprag is not None:
        assert normalize_string(text) == hiprag


_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


@given(
    st.text(
        alphabet=st.sampled_from(list("athen xyz.-_,ÄéİⅫ\t\n\x00\x1c\xa0")) | st.characters(), max_size=40
    )
)
def test_it_keeps_the_fast_path_equal_to_the_squad_definition(text: str) -> None:
    # normalize_answer takes a shortcut for plain ASCII text; it must equal the reference's regex pipeline
    expected = " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    ("prediction", "golds", "em", "subem"),
    [
        pytest.param("paris.", ["Paris"], True, True, id="punctuation"),
        pytest.param("The Paris", "paris", True, True, id="article-and-single-gold-string"),
        # Sub-EM is a character substring test: "parisian" covers "paris"
        pytest.param("parisian", ["paris"], False, True, id="character-substring"),
        # an empty gold is contained in every prediction
        pytest.param("Paris", [""], False, True, id="empty-gold"),
        pytest.param("", [""], True, True, id="both-empty"),
        pytest.param("108", ["10.8"], True, True, id="decimal-point-deleted"),
        pytest.param("Lyon", ["Paris", "Marseille"], False, False, id="miss"),
        pytest.param("Röntgen", ["Rontgen"], False, False, id="accents-kept"),
    ],
)
def test_it_matches_exactly_and_by_substring(
    prediction: str, golds: list[str], em: bool, subem: bool
) -> None:
    assert exact_match(prediction, golds) is em
    assert substring_match(prediction, golds) is subem


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        # HiPRAG: "U.S.A." -> "u s", which does not contain "usa" (but does equal "U S A" -> "u s")
        pytest.param("U.S.A.", ["USA"], False, id="usa-vs-USA"),
        pytest.param("U.S.A.", ["U S A"], True, id="usa-vs-U-S-A"),
        pytest.param("the-end", ["end"], True, id="the-end"),
        # an empty or missing prediction never matches, even an empty gold
        pytest.param("", [""], False, id="empty-prediction"),
        pytest.param(None, ["x"], False, id="none-prediction"),
        pytest.param("paris city", "Paris", True, id="gold-string"),
    ],
)
def test_it_covers_like_hiprag(prediction: str | None, golds: list[str] | str, expected: bool) -> None:
    assert cover_exact_match(prediction, golds) is expected


@pytest.mark.parametrize(
    ("prediction", "golds", "f1", "precision", "recall"),
    [
        pytest.param("Paris, France", ["Paris"], 2 / 3, 0.5, 1.0, id="partial"),
        # yes/no: a different answer on either side is 0, never partial credit
        pytest.param("yes it is", ["yes"], 0.0, 0.0, 0.0, id="yes-no-rule"),
        pytest.param("yes", ["no"], 0.0, 0.0, 0.0, id="yes-vs-no"),
        pytest.param("no", ["yes", "no"], 1.0, 1.0, 1.0, id="yes-no-second-gold"),
        # the three numbers are maxed over golds independently
        pytest.param("Barack Obama", ["Obama", "Barack Hussein Obama"], 0.8, 1.0, 1.0, id="independent-max"),
        pytest.param("Paris", [""], 0.0, 0.0, 0.0, id="empty-gold"),
        pytest.param("cat cat dog", ["cat dog dog"], 2 / 3, 2 / 3, 2 / 3, id="multiset-overlap"),
    ],
)
def test_it_scores_token_f1_like_flashrag(
    prediction: str, golds: list[str], f1: float, precision: float, recall: float
) -> None:
    scores = token_f1(prediction, golds)
    assert (scores.f1, scores.precision, scores.recall) == pytest.approx((f1, precision, recall), abs=1e-12)


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        # AutoSearch has no yes/no rule, and rounds to 4 places
        pytest.param("yes it is", ["yes"], 0.5, id="no-yes-no-rule"),
        pytest.param("Paris, France", ["Paris"], 0.6667, id="rounded"),
        pytest.param(None, ["x"], 0.0, id="none"),
        pytest.param("", [""], 0.0, id="empty"),
    ],
)
def test_it_scores_query_f1_like_autosearch(
    prediction: str | None, golds: list[str], expected: float
) -> None:
    assert query_f1(prediction, golds) == expected


@pytest.mark.parametrize(
    ("prediction", "golds", "expected"),
    [
        # every gold token among the prediction's tokens, in any order
        pytest.param("York New City", ["New York"], True, id="tokens-any-order"),
        # whole tokens, not characters
        pytest.param("parisian", ["paris"], False, id="not-a-substring-test"),
    ],
)
def test_it_covers_tokens(prediction: str, golds: list[str], expected: bool) -> None:
    assert token_cover_match(prediction, golds) is expected


@given(st.text(max_size=30), st.lists(st.text(max_size=15), min_size=1, max_size=3))
def test_it_keeps_f1_in_range_and_em_implies_the_rest(prediction: str, golds: list[str]) -> None:
    scores = token_f1(prediction, golds)
    assert 0.0 <= scores.f1 <= 1.0
    assert 0.0 <= query_f1(prediction, golds) <= 1.0
    if exact_match(prediction, golds):
        assert substring_match(prediction, golds)


@pytest.mark.parametrize(
    ("prediction", "gold", "acc", "cem"),
    [
        # issue 33 item 5: FlashRAG deletes punctuation, HiPRAG turns it into a space
        pytest.param("U.S.A.", "USA", True, False, id="usa"),
        pytest.param("AC/DC", "ACDC", True, False, id="acdc"),
        pytest.param("O'Neill", "ONeill", True, False, id="oneill"),
        pytest.param("Jay Z", "Jay-Z", False, True, id="jay-z"),
        pytest.param("Jay-Z", "Jay Z", False, True, id="jay-z-reversed"),
        pytest.param("It was Paris, France.", "paris", True, True, id="both-cover"),
        pytest.param("Lyon", "Paris", False, False, id="neither"),
    ],
)
def test_it_tells_flashrag_acc_from_hiprag_cem(prediction: str, gold: str, acc: bool, cem: bool) -> None:
    assert flashrag_acc(prediction, [gold]) is acc
    assert cover_exact_match(prediction, [gold]) is cem


def test_it_scores_a_missing_answer_zero_under_acc() -> None:
    assert flashrag_acc(None, ["Paris"]) is False
    # an empty string is what FlashRAG is handed: its acc is 1 only for a gold that normalizes to ""
    assert flashrag_acc("", ["Paris"]) is False
    assert flashrag_acc("", ["the"]) is True


def test_it_matches_flashrag_calculate_sub_em_on_every_recorded_vector(reference_dir: Path) -> None:
    records = [
        json.loads(line)
        for line in (reference_dir / "answer_metrics.jsonl").read_text().splitlines()
        if '"flashrag.Sub_ExactMatch.calculate_sub_em"' in line
    ]
    assert len(records) > 10
    for record in records:
        given_input = record["input"]
        got = float(flashrag_acc(given_input["prediction"], given_input["golden_answers"]))
        assert got == record["output"], given_input
