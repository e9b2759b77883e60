"""The *evidence* judge: a **heuristic** over-/under-search detector for HiPRAG that needs no LLM.

HiPRAG's detectors are LLM judges (§3.2): over-search re-asks the search step's query without retrieval and asks
a judge whether the answers agree; under-search asks a verifier whether a non-search step is correct. On a CPU with a
135M policy neither is available in a useful form, so searchlab offers this stand-in for training and for the demo,
labelled as a heuristic wherever it appears (judge model name :data:`JUDGE_MODEL`), auditable like any judge
(its verdicts are stored per step, and an audit measures it against humans). LLM judges stay the default wherever
an endpoint is configured.

The rules, exactly (``supporting_titles`` are the dataset's annotation of the passages a question needs, e.g.
wiki_multihop's ``metadata.supporting_titles``; titles are compared case-insensitively):

* **Over-search** (a search step): TRUE when its query repeats an earlier query of the trajectory — the Jaccard
  similarity of the two queries' content-word sets is at least :data:`REPEAT_SIMILARITY` (AutoSearch's
  repeated-query check, §3.3, with word sets instead of its TF-IDF) — or, when the question's supporting titles are
  known, when the step retrieves no supporting passage that an earlier step had not already retrieved. Otherwise
  FALSE. Without supporting titles only the repetition rule applies.

  Each TRUE names the rule that fired (:func:`over_search_findings`), the first of:
  :data:`REPEATED_QUERY`; :data:`ALREADY_RETRIEVED` — every supporting passage was already retrieved before this
  step, or this step retrieved supporting passages but only ones retrieved before (what it asked for was in hand);
  :data:`NO_NEW_SUPPORT` — supporting passages were still missing and this step retrieved none of them. The last
  is mostly a *retrieval miss* (the engine did not return the passage), not redundancy: HiPRAG's own test (re-ask
  the query without retrieval, Sec. 3.2) would not call such a search over-search unless the model knew the
  answer, so ``scoring.aggregates`` also reports OSR without it (``osr_redundant``).
* **Under-search** (a non-search step): TRUE when its conclusion is neither correct nor grounded: it contains no
  gold answer (after SQuAD normalisation) *and* fewer than :data:`GROUNDED_SHARE` of its content words occur in
  the question or in the passages retrieved before it. A conclusion with no content words asserts nothing: FALSE.

Retrieved titles are read from the ``Doc k(Title: …)`` headers HiPRAG's ``<context>`` carries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from scoring.metrics import normalize_answer
from scoring.trajectory import Trajectory
from scoring.verdicts import Verdict

JUDGE_MODEL = "evidence-heuristic"
REPEATED_QUERY = "repeated_query"
ALREADY_RETRIEVED = "already_retrieved"
NO_NEW_SUPPORT = "no_new_support"
RULES = (REPEATED_QUERY, ALREADY_RETRIEVED, NO_NEW_SUPPORT)
RETRIEVAL_MISS_RULES = frozenset(
    {NO_NEW_SUPPORT}
)  # flags that mostly measure the search engine, not redundancy
REPEAT_SIMILARITY = 0.8
GROUNDED_SHARE = 0.6

_TITLE = re.compile(r"Doc \d+\(Title: (.*?)\) ")
_WORD = re.compile(r"[0-9a-z]+")
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how i in is it its of on or she so that "
    "the their them they this to was were what when where which who whom whose why will with answer answers "
    "question know need find information about search searched based therefore thus also not no yes".split()
)


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def retrieved_titles(context: str) -> list[str]:
    return [title.strip() for title in _TITLE.findall(context or "")]


def query_similarity(a: str, b: str) -> float:
    """Jaccard similarity of the two queries' content-word sets (1.0 for two empty queries)."""
    left, right = content_words(a), content_words(b)
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


@dataclass(frozen=True, slots=True)
class OverSearchFinding:
    """One search step's over-search verdict and the rule that flagged it (``None`` when FALSE)."""

    verdict: Verdict
    rule: str | None = None


def over_search_findings(
    trajectory: Trajectory, supporting_titles: Sequence[str] = ()
) -> dict[int, OverSearchFinding]:
    """One finding per search step, by step index (see the module docstring for the rules and their order)."""
    wanted = {t.casefold() for t in supporting_titles}
    seen_titles: set[str] = set()
    earlier_queries: list[str] = []
    findings: dict[int, OverSearchFinding] = {}
    for step in trajectory.search_steps:
        query = step.query or ""
        repeated = any(query_similarity(query, q) >= REPEAT_SIMILARITY for q in earlier_queries)
        titles = {t.casefold() for t in retrieved_titles(step.context or "")}
        brings_new_support = bool((titles & wanted) - seen_titles)
        rule: str | None = None
        if repeated:
            rule = REPEATED_QUERY
        elif wanted and not brings_new_support:
            in_hand = wanted <= seen_titles or bool(titles & wanted)
            rule = ALREADY_RETRIEVED if in_hand else NO_NEW_SUPPORT
        findings[step.index] = OverSearchFinding(Verdict.TRUE if rule else Verdict.FALSE, rule)
        seen_titles |= titles
        earlier_queries.append(query)
    return findings


def over_search_flags(trajectory: Trajectory, supporting_titles: Sequence[str] = ()) -> dict[int, Verdict]:
    """One verdict per search step, by step index (see the module docstring for the rules)."""
    return {i: f.verdict for i, f in over_search_findings(trajectory, supporting_titles).items()}


def under_search_flags(trajectory: Trajectory, question: str, golds: Sequence[str]) -> dict[int, Verdict]:
    """One verdict per non-search step, by step index (see the module docstring for the rules)."""
    normalized_golds = [g for g in (normalize_answer(str(g)) for g in golds) if g]
    evidence = content_words(question)
    flags: dict[int, Verdict] = {}
    for step in trajectory.steps:
        if step.is_search:
            evidence |= content_words(step.context or "")
            continue
        conclusion = step.conclusion or ""
        words = content_words(conclusion)
        normalized = f" {normalize_answer(conclusion)} "
        correct = any(f" {g} " in normalized for g in normalized_golds)
        grounded = not words or len(words & evidence) / len(words) >= GROUNDED_SHARE
        flags[step.index] = Verdict.TRUE if not (correct or grounded) else Verdict.FALSE
    return flags
