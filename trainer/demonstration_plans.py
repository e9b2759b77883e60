"""What a warm-start demonstration says: the searches of a question (one per supporting fact) and its answer.

A question whose supporting facts are known (the dataset's ``metadata.supporting_titles``) becomes a :class:`Plan`:
one search per supporting fact, its query written from the fact's title and the question, and the gold answer.
Questions marked as single-hop common knowledge get a *no-search* plan (HiPRAG's point: the agent must also see when
not to search); see :func:`needs_search`. :mod:`trainer.demonstrations` plays a plan through the method's loop.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from agent.rollout import Question
from scoring.metrics import normalize_answer

_WORD = re.compile(r"[^\W_][\w'\-]*")  # Unicode letters: "Seán" is one word, not "Se" and "n"
STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how in is it its of on or she that the "
    "their them they this to was were what when where which who whom whose why will with".split()
)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a demonstration of one question says: the searches (title, query) in order, and the answer."""

    question: Question
    hops: tuple[tuple[str, str], ...]  # (supporting title, query); empty: a no-search demonstration
    answer: str
    redundant: str = (
        ""  # the kind of its redundant last search (REDUNDANT_KINDS), or "" when every search is needed
    )


# A redundant search, the controlled test of a process reward's mechanism (docs/warm_start.md): ``repeat`` asks the
# first hop's query again, word for word; ``known`` asks for the first hop's fact by its title alone, which the
# first search's passages already gave.
REDUNDANT_KINDS = ("repeat", "known")


def with_redundant_search(plan: Plan, kind: str) -> Plan:
    """``plan`` with one redundant search after its needed ones (``kind``: one of :data:`REDUNDANT_KINDS`); the
    answer is unchanged, so an outcome reward cannot tell the two demonstrations apart and a process reward can."""
    if not plan.hops or kind not in REDUNDANT_KINDS:
        raise ValueError(f"a redundant search needs a searched plan and a kind in {REDUNDANT_KINDS}")
    title, query = plan.hops[0]
    return replace(plan, hops=(*plan.hops, (title, query if kind == "repeat" else title)), redundant=kind)


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in STOPWORDS]


def needs_search(row: Mapping[str, Any]) -> bool:
    """The no-search rule: a question needs no search when its dataset marks it as single-hop common knowledge
    (``metadata.single_hop_common_knowledge``, e.g. ``demo/common_knowledge.jsonl``, or a ``*_single`` data
    source such as the demo's) or when its gold answer appears in the question itself and it is not a
    comparison (which still needs the facts of both sides). Everything else is searched, one hop per supporting
    title."""
    metadata = row.get("metadata") if isinstance(row.get("metadata"), Mapping) else {}
    assert isinstance(metadata, Mapping)
    if metadata.get("single_hop_common_knowledge") or str(metadata.get("data_source", "")).endswith(
        "_single"
    ):
        return False
    question = normalize_answer(str(row.get("question", "")))
    golds = [normalize_answer(str(g)) for g in row.get("golden_answers") or ()]
    in_question = any(g and g not in ("yes", "no") and f" {g} " in f" {question} " for g in golds)
    comparison = metadata.get("type") == "comparison" or " or " in f" {question} "
    return not (in_question and not comparison)


def plan_for(row: Mapping[str, Any]) -> Plan | None:
    """The demonstration plan of a FlashRAG question row, or ``None`` when it cannot be demonstrated (no answer,
    or a question that needs search but names no supporting titles)."""
    golds = [str(g) for g in row.get("golden_answers") or () if str(g).strip()]
    if not golds or not str(row.get("question", "")).strip():
        return None
    question = Question(
        id=str(row.get("id", "")),
        text=str(row["question"]).strip(),
        golds=tuple(golds),
        dataset=str((row.get("metadata") or {}).get("data_source", "")),
    )
    if not needs_search(row):
        return Plan(question, (), golds[0])
    titles = [str(t) for t in (row.get("metadata") or {}).get("supporting_titles") or () if str(t).strip()]
    if not titles:
        return None
    # The bridge entity the question names goes first: the second hop is found through the first one's facts.
    asked = {w.lower() for w in content_words(question.text)}
    titles.sort(key=lambda t: -len({w.lower() for w in content_words(t)} & asked))
    hops = tuple((title, query_for(title, question.text)) for title in dict.fromkeys(titles))
    return Plan(question, hops, golds[0])


def query_for(title: str, question: str) -> str:
    """A search query written from the fact's title and the question: the title, then up to three of the
    question's content words it does not already hold."""
    have = {w.lower() for w in content_words(title)}
    extra = [w for w in content_words(question) if w.lower() not in have][:3]
    return " ".join([title, *extra]).strip()
