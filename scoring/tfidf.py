"""scikit-learn's default ``TfidfVectorizer()`` and ``cosine_similarity``, in the standard library.

AutoSearch's repeated-query check (``qa_em_format_turn62.is_repeat_part``, REFERENCE.md §b AutoSearch) fits a fresh
``TfidfVectorizer()`` on the few strings it compares and takes ``cosine_similarity`` of the first against the rest.
This module reproduces exactly that, with sklearn's defaults:

* analysis: ``doc.lower()`` then ``re.findall(r"(?u)\\b\\w\\w+\\b", doc)`` — words of two or more word characters, so
  one-character tokens (``"x"``, ``"5"``) are dropped; no accent stripping, no stop words, unigrams only;
* vocabulary: every token of every document (``min_df=1``, ``max_df=1.0`` prune nothing); none at all raises
  ``ValueError("empty vocabulary; perhaps the documents only contain stop words")`` as sklearn does;
* weights: raw counts × ``idf = ln((1 + n) / (1 + df)) + 1`` (``smooth_idf=True``, ``sublinear_tf=False``), each row
  then divided by its L2 norm (a row without tokens stays all zero);
* ``cosine_similarity`` normalizes both rows *again* and takes their dot product (a zero row gives 0.0).

Everything is IEEE float64, as sklearn computes it, and the sums run in the order scipy's CSR kernels run them: a
row's entries in order of first appearance of their terms across the fitted corpus (``CountVectorizer._count_vocab``
sorts each row by that index; the later alphabetical re-indexing does not re-sort). The one operation that can still
differ in the last unit of precision is the logarithm (``numpy.log`` vs ``math.log``); a repeat decision could only
flip for a cosine within ~1e-16 of the 0.8 threshold.

>>> round(tfidf_cosine_similarities("best picture winner 1998", ["best picture 1998"])[0], 6)
0.776515
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")  # sklearn's default token_pattern
EMPTY_VOCABULARY = "empty vocabulary; perhaps the documents only contain stop words"

SparseRow = tuple[tuple[int, float], ...]  # (term id, weight), term ids in first-appearance order


def tokenize(document: str) -> list[str]:
    """sklearn's default analyzer: lower-case, then every run of two or more word characters.

    >>> tokenize("Who won the 1998 Best-Picture? A: x")
    ['who', 'won', 'the', '1998', 'best', 'picture']
    """
    return TOKEN_PATTERN.findall(document.lower())


@dataclass(frozen=True, slots=True)
class TfidfMatrix:
    """A fitted TF-IDF matrix: one L2-normalized sparse row per document.

    Term ids number the vocabulary in order of first appearance across the documents (the order sklearn's sums
    follow); ``vocabulary`` maps each term to its id and ``idf`` is indexed by id.
    """

    vocabulary: dict[str, int]
    idf: tuple[float, ...]
    rows: tuple[SparseRow, ...]

    @property
    def feature_names(self) -> list[str]:
        """The terms in sklearn's column order (sorted), as ``get_feature_names_out()`` lists them."""
        return sorted(self.vocabulary)


def _l2_normalize(row: SparseRow) -> SparseRow:
    # sklearn.utils.sparsefuncs_fast.inplace_csr_row_normalize_l2: sequential sum of squares, skip an all-zero row
    total = 0.0
    for _, value in row:
        total += value * value
    if total == 0.0:
        return row
    norm = math.sqrt(total)
    return tuple((term, value / norm) for term, value in row)


def fit_transform(documents: Sequence[str]) -> TfidfMatrix:
    """``TfidfVectorizer().fit_transform(documents)``; raises ``ValueError`` when no document has a token."""
    vocabulary: dict[str, int] = {}
    counts: list[dict[int, int]] = []
    for document in documents:
        row: dict[int, int] = {}
        for token in tokenize(document):
            term = vocabulary.setdefault(token, len(vocabulary))
            row[term] = row.get(term, 0) + 1
        counts.append(row)
    if not vocabulary:
        raise ValueError(EMPTY_VOCABULARY)
    document_frequency = [0] * len(vocabulary)
    for row in counts:
        for term in row:
            document_frequency[term] += 1
    n_samples = len(documents) + 1  # smooth_idf: as if one extra document held every term once
    idf = tuple(math.log(n_samples / (df + 1.0)) + 1.0 for df in document_frequency)
    rows = tuple(
        _l2_normalize(tuple((term, float(row[term]) * idf[term]) for term in sorted(row))) for row in counts
    )
    return TfidfMatrix(vocabulary=vocabulary, idf=idf, rows=rows)


def cosine_similarity(a: SparseRow, b: SparseRow) -> float:
    """``sklearn.metrics.pairwise.cosine_similarity`` of two sparse rows (both re-normalized, then dotted).

    The dot product accumulates over ``a``'s entries in order, as scipy's CSR matrix product does.
    """
    a_unit, b_unit = _l2_normalize(a), _l2_normalize(b)
    b_weights = dict(b_unit)
    total = 0.0
    for term, value in a_unit:
        other = b_weights.get(term)
        if other is not None:
            total += value * other
    return total


def _unit_vector(counts: dict[int, int], idf: Sequence[float]) -> tuple[list[int], list[float]]:
    # the fitted row (normalized once) as cosine_similarity re-normalizes it: the same float operations as
    # fit_transform + cosine_similarity, without building the intermediate tuples
    terms = sorted(counts)
    values = [float(counts[term]) * idf[term] for term in terms]
    for _ in range(2):
        total = 0.0
        for value in values:
            total += value * value
        if total != 0.0:
            norm = math.sqrt(total)
            values = [value / norm for value in values]
    return terms, values


def tfidf_cosine_similarities(query: str, documents: Sequence[str]) -> list[float]:
    """Fit on ``[query, *documents]`` and return the cosine of the query's row against each document's row.

    This is what AutoSearch's ``subm_tfidf_cosine`` computes (before it clips negatives, which TF-IDF never has),
    bit for bit what :func:`fit_transform` then :func:`cosine_similarity` give, only faster.
    Raises ``ValueError`` on an empty vocabulary, exactly when sklearn does.
    """
    vocabulary: dict[str, int] = {}
    counts: list[dict[int, int]] = []
    for document in (query, *documents):
        row: dict[int, int] = {}
        for token in TOKEN_PATTERN.findall(document.lower()):
            term = vocabulary.setdefault(token, len(vocabulary))
            row[term] = row.get(term, 0) + 1
        counts.append(row)
    if not vocabulary:
        raise ValueError(EMPTY_VOCABULARY)
    document_frequency = [0] * len(vocabulary)
    for row in counts:
        for term in row:
            document_frequency[term] += 1
    n_samples = len(counts) + 1
    idf = [math.log(n_samples / (df + 1.0)) + 1.0 for df in document_frequency]
    query_terms, query_values = _unit_vector(counts[0], idf)
    query_row = counts[0]
    similarities: list[float] = []
    for row in counts[1:]:
        if query_row.keys().isdisjoint(row):
            similarities.append(0.0)  # the dot product would add nothing to 0.0
            continue
        terms, values = _unit_vector(row, idf)
        weights = dict(zip(terms, values, strict=True))
        total = 0.0
        for term, value in zip(query_terms, query_values, strict=True):
            other = weights.get(term)
            if other is not None:
                total += value * other
        similarities.append(total)
    return similarities
