"""Answer metrics: normalizers, exact match, cover exact match, FlashRAG's ``acc`` and token F1, over one or several
gold answers.

Two normalizers exist in the papers' code and they disagree, so both are kept (../shared/reference/REFERENCE.md §a):

* :func:`normalize_answer` — SQuAD's, used by Search-R1, FlashRAG, AutoSearch and TIRESRAG-R1: lower-case, *delete*
  ASCII punctuation, drop the articles a/an/the, collapse whitespace. ``"U.S.A."`` → ``"usa"``.
* :func:`normalize_string` — HiPRAG's, used for its cover exact match: lower-case, drop the articles, *replace*
  ASCII punctuation by a space, collapse whitespace. ``"U.S.A."`` → ``"u s"``: the articles go while the dots
  still make word boundaries, so the last "a" is an article (REFERENCE.md §a says ``"u s a"``; the code and the
  vectors say ``"u s"``, and ``"U S A"`` normalizes to ``"u s"`` too).

Several golds always combine by *any* (match) or *max* (F1).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

Normalizer = Callable[[str], str]

_ARTICLES = re.compile(r"\b(a|an|the)\b")  # \b is Unicode-aware, as in the reference code
_DELETE_PUNCTUATION = str.maketrans("", "", string.punctuation)
_SPACE_FOR_PUNCTUATION = str.maketrans(string.punctuation, " " * len(string.punctuation))
_YES_NO = frozenset({"yes", "no", "noanswer"})
_ARTICLE_WORDS = frozenset({"a", "an", "the"})
_ASCII_WHITESPACE = b" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"  # what str.split() splits an ASCII text at


def normalize_answer(s: str) -> str:
    """SQuAD normalization (Search-R1 ``qa_em.normalize_answer``, FlashRAG, AutoSearch).

    >>> normalize_answer("The U.S.A.!")
    'usa'
    """
    return drop_articles(s.lower().translate(_DELETE_PUNCTUATION))


def drop_articles(text: str) -> str:
    """The rest of :func:`normalize_answer` for a ``text`` already lower-cased with its ASCII punctuation deleted
    (a caller that has that form at hand, as a retrieval check does, skips recomputing it): articles dropped,
    whitespace collapsed."""
    if text.isascii() and text.encode("ascii").translate(None, _ASCII_WHITESPACE).isalnum():
        # Fast path, same result: an ASCII text of letters and digits between whitespace has word boundaries only
        # at whitespace, so `\b(a|an|the)\b` matches whole tokens. (The check runs on bytes: str.isalnum looks
        # every character up in the Unicode tables.)
        tokens = text.split()
        if _ARTICLE_WORDS.isdisjoint(tokens):  # a long passage: no token-by-token filter in Python
            return " ".join(tokens)
        return " ".join([t for t in tokens if t not in _ARTICLE_WORDS])
    return " ".join(_ARTICLES.sub(" ", text).split())


def normalize_string(s: str) -> str:
    """HiPRAG's normalization (``qa_em_format.normalize_string``): articles first, punctuation becomes a space.

    >>> normalize_string("The U.S.A.!")
    'u s'
    >>> normalize_string("the-end")
    'end'
    """
    text = _ARTICLES.sub(" ", s.lower()).translate(_SPACE_FOR_PUNCTUATION)
    return " ".join(text.split())


# Every rollout of a group, and every answer of a rollout, is matched against the same golds: their normalized forms
# are cached (predictions are not: they rarely repeat). The normalizers are pure functions of the string.
_CACHED_FOR_GOLDS: dict[Normalizer, Normalizer] = {
    normalize_answer: lru_cache(maxsize=65536)(normalize_answer),
    normalize_string: lru_cache(maxsize=65536)(normalize_string),
}


def normalized_golds(golds: str | Iterable[str], normalize: Normalizer = normalize_answer) -> list[str]:
    """Each gold normalized, in order (a single string counts as one gold)."""
    cached = _CACHED_FOR_GOLDS.get(normalize, normalize)
    return [cached(g) for g in as_golds(golds)]


def as_golds(golds: str | Iterable[str]) -> list[str]:
    """A single gold string counts as a list of one, as every reference implementation does."""
    return [golds] if isinstance(golds, str) else [str(g) for g in golds]


def exact_match(
    prediction: str, golds: str | Iterable[str], normalize: Normalizer = normalize_answer
) -> bool:
    """EM: the normalized prediction equals some normalized gold."""
    pred = normalize(prediction)
    return pred in normalized_golds(golds, normalize)


def substring_match(
    prediction: str, golds: str | Iterable[str], normalize: Normalizer = normalize_answer
) -> bool:
    """Sub-EM as Search-R1 ``subem_check`` and FlashRAG ``acc`` compute it: some normalized gold is a *character*
    substring of the normalized prediction (so ``"parisian"`` covers ``"paris"`` and an empty gold covers all)."""
    pred = normalize(prediction)
    return any(gold in pred for gold in normalized_golds(golds, normalize))


def flashrag_acc(prediction: str | None, golds: str | Iterable[str]) -> bool:
    """FlashRAG's ``acc`` (``flashrag/evaluator/metrics.py``, class ``Sub_ExactMatch``, ``metric_name = "acc"``,
    ``calculate_sub_em``): some gold, normalized by FlashRAG's ``normalize_answer`` (SQuAD's, here
    :func:`normalize_answer`), is a character substring of the normalized prediction. This is the accuracy
    Search-R1 (Table 2), TIRESRAG-R1 and AutoSearch report; it is :func:`substring_match` with SQuAD's normalizer.

    It differs from HiPRAG's CEM (:func:`cover_exact_match`) only through the normalizer: ``"U.S.A."`` covers
    ``"USA"`` here (both ``"usa"``) but not under CEM (``"u s"``); ``"Jay Z"`` covers ``"Jay-Z"`` under CEM (both
    ``"jay z"``) but not here (``"jayz"``). A missing prediction (no answer span) scores 0, where FlashRAG would be
    handed an empty string, whose ``acc`` is 0 unless a gold normalizes to ``""``. FlashRAG's regex mode (dataset
    ``curatedtrec`` only) is not reproduced.

    >>> flashrag_acc("U.S.A.", ["USA"]), cover_exact_match("U.S.A.", ["USA"])
    (True, False)
    """
    if prediction is None:
        return False
    return substring_match(prediction, golds, normalize_answer)


def cover_exact_match(
    prediction: str | None, golds: str | Iterable[str], normalize: Normalizer = normalize_string
) -> bool:
    """HiPRAG's CEM (``cover_exact_match``): an empty or missing prediction never matches; otherwise Sub-EM with
    HiPRAG's normalizer."""
    if not prediction:
        return False
    return substring_match(prediction, golds, normalize)


def token_cover_match(
    prediction: str, golds: str | Iterable[str], normalize: Normalizer = normalize_answer
) -> bool:
    """Token-level cover match (TIRESRAG-R1's CEM): every token of some gold occurs among the prediction's tokens."""
    pred_tokens = set(normalize(prediction).split())
    return any(all(t in pred_tokens for t in normalize(g).split()) for g in as_golds(golds))


@dataclass(frozen=True, slots=True)
class F1Score:
    f1: float
    precision: float
    recall: float


def _overlap_scores(pred_tokens: Sequence[str], gold_tokens: Sequence[str]) -> F1Score | None:
    same = _common_count(pred_tokens, gold_tokens)
    if same == 0:
        return None
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return F1Score(2 * precision * recall / (precision + recall), precision, recall)


def _common_count(pred_tokens: Sequence[str], gold_tokens: Sequence[str]) -> int:
    """``sum((Counter(pred_tokens) & Counter(gold_tokens)).values())``, the tokens the two share counted with
    multiplicity, without building three Counters for answers of a few tokens."""
    left: dict[str, int] = {}
    for token in gold_tokens:
        left[token] = left.get(token, 0) + 1
    same = 0
    for token in pred_tokens:
        count = left.get(token)
        if count:
            same += 1
            left[token] = count - 1
    return same


def token_f1(
    prediction: str, golds: str | Iterable[str], normalize: Normalizer = normalize_answer
) -> F1Score:
    """FlashRAG ``F1_Score.token_level_scores``: whitespace-token F1 against each gold.

    A gold is skipped when either side normalizes to yes/no/noanswer and the two differ (a yes/no question is
    right or wrong, never half right). F1, precision and recall are each maximised over golds independently.
    """
    best = [0.0, 0.0, 0.0]
    pred = normalize(prediction)
    for gold in as_golds(golds):
        gold_norm = normalize(gold)
        if (pred in _YES_NO or gold_norm in _YES_NO) and pred != gold_norm:
            continue
        scores = _overlap_scores(pred.split(), gold_norm.split())
        if scores is None:
            continue
        best = [max(best[0], scores.f1), max(best[1], scores.precision), max(best[2], scores.recall)]
    return F1Score(*best)


def query_f1(prediction: str | None, golds: str | Iterable[str]) -> float:
    """AutoSearch ``query_f1_score``: token F1 without the yes/no rule, ``None`` scores 0, rounded to 4 places."""
    if prediction is None:
        return 0.0
    pred_tokens = normalize_answer(prediction).split()
    best = 0.0
    for gold in as_golds(golds):
        scores = _overlap_scores(pred_tokens, normalize_answer(gold).split())
        if scores is not None:
            best = max(best, scores.f1)
    return round(best, 4)
