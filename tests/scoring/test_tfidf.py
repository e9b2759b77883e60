"""scoring.tfidf against values computed by hand from sklearn's documented defaults."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.tfidf import (
    EMPTY_VOCABULARY,
    cosine_similarity,
    fit_transform,
    tfidf_cosine_similarities,
    tokenize,
)


def idf(n_documents: int, document_frequency: int) -> float:
    """sklearn's smoothed idf, written out: ln((1 + n) / (1 + df)) + 1."""
    return math.log((1 + n_documents) / (1 + document_frequency)) + 1


@pytest.mark.parametrize(
    ("document", "tokens"),
    [
        # lower-cased; punctuation splits words
        pytest.param("Best-Picture, 1998!", ["best", "picture", "1998"], id="lower-and-punctuation"),
        # one-character tokens are dropped (the pattern needs two word characters)
        pytest.param("x y z ab", ["ab"], id="one-char-dropped"),
        # an apostrophe splits, and the lone "t" is dropped
        pytest.param("don't", ["don"], id="apostrophe"),
        # \w is Unicode-aware and nothing strips accents
        pytest.param("Röntgen STRASSE straße", ["röntgen", "strasse", "straße"], id="unicode"),
        # underscores are word characters
        pytest.param("snake_case a_b", ["snake_case", "a_b"], id="underscore"),
        # nothing at all
        pytest.param("", [], id="empty"),
    ],
)
def test_it_tokenizes_like_sklearns_default_analyzer(document: str, tokens: list[str]) -> None:
    assert tokenize(document) == tokens


def test_it_weights_rare_terms_up_and_normalizes_each_row() -> None:
    matrix = fit_transform(["best picture winner 1998", "best picture 1998"])
    assert matrix.feature_names == ["1998", "best", "picture", "winner"]
    # shared terms have df = 2 of 2 (idf 1); "winner" df = 1
    assert matrix.idf[matrix.vocabulary["best"]] == pytest.approx(1.0)
    assert matrix.idf[matrix.vocabulary["winner"]] == pytest.approx(idf(2, 1))
    for row in matrix.rows:
        assert sum(value * value for _, value in row) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("query", "documents", "expected"),
    [
        # one extra rare term: 3 / (sqrt(3 + idf(2,1)^2) * sqrt(3))
        pytest.param(
            "best picture winner 1998",
            ["best picture 1998"],
            [3 / (math.sqrt(3 + idf(2, 1) ** 2) * math.sqrt(3))],
            id="extra-rare-term",
        ),
        # term frequency counts: (2, 1) · (1, 1) / (sqrt 5 · sqrt 2)
        pytest.param("titanic titanic film", ["titanic film"], [3 / math.sqrt(10)], id="raw-counts"),
        # three documents: the query (river, empire) against (river) and (empire, treaty)
        pytest.param(
            "river empire",
            ["river", "empire treaty"],
            [
                1 / math.sqrt(2),
                idf(3, 2) / (math.sqrt(2) * math.sqrt(idf(3, 2) ** 2 + idf(3, 1) ** 2)),
            ],
            id="three-documents",
        ),
        # no shared term: exactly zero
        pytest.param("director of titanic", ["best picture"], [0.0], id="disjoint"),
        # a document with no token of two characters is an all-zero row: cosine 0, not an error
        pytest.param("titanic", ["x y"], [0.0], id="zero-row"),
        # identical documents (case aside), and a sub-document: titanic has idf 1 (in all three), film idf(3, 2)
        pytest.param(
            "Titanic film", ["titanic FILM", "titanic"], [1.0, 1 / math.sqrt(1 + idf(3, 2) ** 2)], id="same"
        ),
    ],
)
def test_it_computes_cosines_by_hand(query: str, documents: list[str], expected: list[float]) -> None:
    assert tfidf_cosine_similarities(query, documents) == pytest.approx(expected, rel=1e-12, abs=0.0)


@pytest.mark.parametrize(
    "documents",
    [
        # every token is a single character (AutoSearch's "x y" queries)
        pytest.param(["x y", "x y"], id="one-char-tokens"),
        # nothing but punctuation and blanks
        pytest.param(["", " ?! "], id="no-words"),
    ],
)
def test_it_raises_sklearns_value_error_on_an_empty_vocabulary(documents: list[str]) -> None:
    with pytest.raises(ValueError, match=EMPTY_VOCABULARY):
        fit_transform(documents)
    with pytest.raises(ValueError, match="empty vocabulary"):
        tfidf_cosine_similarities(documents[0], documents[1:])


words = st.lists(
    st.sampled_from(["titanic", "film", "best", "1998", "x", "director", "the"]), max_size=6
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(query=words, documents=st.lists(words, min_size=1, max_size=4))
def test_its_fast_path_is_bit_identical_to_fit_then_cosine(query: str, documents: list[str]) -> None:
    try:
        matrix = fit_transform([query, *documents])
    except ValueError:
        with pytest.raises(ValueError):
            tfidf_cosine_similarities(query, documents)
        return
    slow = [cosine_similarity(matrix.rows[0], row) for row in matrix.rows[1:]]
    fast = tfidf_cosine_similarities(query, documents)
    assert fast == slow  # exact: the same float operations in the same order
    assert all(-1e-12 <= value <= 1 + 1e-12 for value in fast)


# scikit-learn is installed beside the model stack (sentence-transformers needs it); where it is, check our stdlib
# TF-IDF against the real TfidfVectorizer on arbitrary documents, the way AutoSearch's is_repeat_part uses it.


@settings(max_examples=200, deadline=None)
@given(
    query=st.text(alphabet="ab cé1_-", max_size=20),
    history=st.lists(st.text(alphabet="ab cé1_-", max_size=20), min_size=1, max_size=4),
)
def test_it_agrees_with_scikit_learn(query: str, history: list[str]) -> None:
    text = pytest.importorskip("sklearn.feature_extraction.text", reason="scikit-learn is not installed")
    from sklearn.metrics.pairwise import cosine_similarity as sk_cosine

    documents = [query, *history]
    try:
        matrix = text.TfidfVectorizer().fit_transform(documents)
    except ValueError:  # empty vocabulary: ours must refuse the same input
        with pytest.raises(ValueError):
            tfidf_cosine_similarities(query, history)
        return
    expected = sk_cosine(matrix[0:1], matrix[1:]).ravel().tolist()
    assert tfidf_cosine_similarities(query, history) == pytest.approx(expected, abs=1e-12)
