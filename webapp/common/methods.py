"""What the web app adds to scoring's method table (scoring.scorer.METHODS): display names, and the judge a method
needs. scoring stays free of both; every form, model field and command takes the names from here."""

from __future__ import annotations

from collections.abc import Iterable

from scoring.params import param_help
from scoring.scorer import METHODS

LABELS = {
    "search_r1": "Search-R1 (outcome + format)",
    "hiprag": "HiPRAG",
    "autosearch": "AutoSearch",
    "search_p1": "Search-P1",
    "tiresrag": "TIRESRAG-R1",
}
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)
METHOD_CHOICES: list[tuple[str, str]] = [(name, LABELS.get(name, name)) for name in METHODS]
# The evidence judge (scoring.judging.evidence) implements HiPRAG's over-/under-search detectors, which also measure
# Search-R1's over-search; Search-P1's path evaluation and TIRESRAG's sufficiency/thinking judges need an LLM.
EVIDENCE_JUDGE_METHODS = frozenset({"search_r1", "hiprag"})
LLM_JUDGE_METHODS = frozenset({"search_p1", "tiresrag"})


def evidence_judge_problem(methods: Iterable[str]) -> str | None:
    """Why the evidence judge cannot serve these methods, or None."""
    needs_llm = [m for m in methods if m in LLM_JUDGE_METHODS]
    if not needs_llm:
        return None
    return (
        f"the evidence judge implements HiPRAG's over-/under-search detectors only; {', '.join(needs_llm)} "
        "needs an LLM judge (an endpoint, or the policy on a CPU demo)"
    )


def weight_help(name: str) -> str:
    """A form's help for a weight several methods share (``lambda_f``): each method's own declaration in
    scoring.params (what it weighs, the paper's equation, its default and range)."""
    return " ".join(
        f"{param_help(spec.params_type, name)}." for spec in METHODS.values() if name in spec.params
    )
