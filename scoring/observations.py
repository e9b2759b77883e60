"""The text the search environment exchanges with the agent, as pure functions (REFERENCE.md §c).

Used by the rollouts (``agent/``) and the retrieval server (``retrieval/``) so that both speak exactly what
Search-R1 (``search_r1/llm_agent/generation.py``, reused by HiPRAG and AutoSearch), FlashRAG's ``SearchR1Pipeline``
and Search-R1's retrieval server (``search_r1/search/retrieval_server.py``) speak:

* a turn's response is cut at its first ``</search>``, else its first ``</answer>`` (:func:`truncate_response`);
* its action is the first ``<search>…</search>`` or ``<answer>…</answer>`` (:func:`parse_action`);
* retrieved passages become ``Doc i(Title: …) text`` lines (:func:`passages_to_string`) inside an
  ``<information>`` block (Search-R1) or a ``<context>`` block followed by an opening ``<conclusion>`` (HiPRAG);
* a turn with no action gets the "My previous action is invalid" message (:func:`execute_predictions`);
* ``POST /retrieve`` takes ``{"queries", "topk", "return_scores"}`` and returns ``{"result": [[…] per query]}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Action = Literal["search", "answer"]
ObservationStyle = Literal["search_r1", "hiprag"]

_ACTION = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)

SEARCH_END = "</search>"
ANSWER_END = "</answer>"

SEARCHR1_INVALID_ACTION = (
    "\nMy previous action is invalid. "
    "If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)
HIPRAG_INVALID_ACTION = (
    "\nMy previous action is invalid. "
    "If I want to search, I should put the query between <search> and </search>. "
    "If I want to use my own knowledge and previous search results, I should directly give the <conclusion>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)


def truncate_response(text: str) -> str:
    """Search-R1 ``_postprocess_responses``: keep up to the first ``</search>`` if there is one, else up to the
    first ``</answer>``, else everything (the generator has no stop strings, so a turn may run past its action)."""
    for end in (SEARCH_END, ANSWER_END):
        at = text.find(end)
        if at >= 0:
            return text[: at + len(end)]
    return text


def parse_action(text: str) -> tuple[Action | None, str]:
    """Search-R1 ``postprocess_predictions`` for one response: the first ``<search>``/``<answer>`` block, its
    content stripped; ``(None, "")`` when there is none."""
    match = _ACTION.search(text)
    if match is None:
        return None, ""
    action: Action = "search" if match.group(1) == "search" else "answer"
    return action, match.group(2).strip()


def format_passage(index: int, contents: str) -> str:
    """One retrieved passage, 1-based: ``Doc {i}(Title: {first line}) {other lines}\\n``.

    Corpus rows hold ``"title\\ntext"``; Search-R1's wiki-18 titles keep their double quotes (``Title: "Paris"``).
    A row with no newline is all title and an empty text (note the space before the newline).
    """
    title, _, text = contents.partition("\n")
    return f"Doc {index}(Title: {title}) {text}\n"


def passages_to_string(contents: Iterable[str]) -> str:
    """Search-R1 ``_passages2string`` over the passages' ``contents``, in rank order."""
    return "".join(format_passage(i, c) for i, c in enumerate(contents, start=1))


def information_block(passages: str) -> str:
    """Search-R1's observation after a search: the formatted passages, stripped, inside ``<information>``."""
    return f"\n\n<information>{passages.strip()}</information>\n\n"


def hiprag_context_block(passages: str) -> str:
    """HiPRAG's observation after a search: the passages inside ``<context>``, then the environment opens the
    step's ``<conclusion>`` (so that tag is an observation token and masked from the policy loss)."""
    return f"\n    <context>{passages.strip()}</context>\n    <conclusion>"


def flashrag_information_block(contents: Iterable[str]) -> str:
    """FlashRAG ``SearchR1Pipeline._retrieved_docs_to_string``: unlike Search-R1, the passages are not stripped and
    the tags sit on lines of their own."""
    return f"\n\n<information>\n{passages_to_string(contents)}\n</information>\n\n"


_SEARCH_OBSERVATION = {"search_r1": information_block, "hiprag": hiprag_context_block}
_INVALID_OBSERVATION = {"search_r1": SEARCHR1_INVALID_ACTION, "hiprag": HIPRAG_INVALID_ACTION}


@dataclass(frozen=True, slots=True)
class Execution:
    """What the environment answers to one batch of turns (``execute_predictions``' four lists, 0/1 ints)."""

    next_obs: tuple[str, ...]
    dones: tuple[int, ...]
    valid_action: tuple[int, ...]
    is_search: tuple[int, ...]


def execute_predictions(
    predictions: Sequence[str],
    active_mask: Sequence[bool | int],
    search_results: Sequence[str],
    style: ObservationStyle = "search_r1",
) -> Execution:
    """Search-R1 / HiPRAG ``LLMGenerationManager.execute_predictions`` without the search call.

    ``search_results`` holds the formatted passages (:func:`passages_to_string`) of every prediction whose action
    is a search, in order, as the reference's ``batch_search`` returns them. An inactive row is done with an
    empty observation; an answer is done; a search continues with its passages; anything else continues with the
    invalid-action message. As in the reference, results are consumed by active searches only and a count that
    does not match raises (``IndexError`` when too few, ``AssertionError`` when some are left over).
    """
    remaining = list(search_results)
    remaining.reverse()  # pop() from the end is the reference's pop(0) from the front, without the O(n) shift
    search_observation = _SEARCH_OBSERVATION[style]
    next_obs: list[str] = []
    dones: list[int] = []
    valid: list[int] = []
    searched: list[int] = []
    for prediction, active in zip(predictions, active_mask, strict=False):
        action, _ = parse_action(prediction)
        if not active:
            outcome = ("", 1, 0, 0)
        elif action == "answer":
            outcome = ("", 1, 1, 0)
        elif action == "search":
            if not remaining:
                raise IndexError("pop from empty list")
            outcome = (search_observation(remaining.pop()), 0, 1, 1)
        else:
            outcome = (_INVALID_OBSERVATION[style], 0, 0, 0)
        next_obs.append(outcome[0])
        dones.append(outcome[1])
        valid.append(outcome[2])
        searched.append(outcome[3])
    if remaining:
        raise AssertionError(f"{len(remaining)} search results were not used")
    return Execution(tuple(next_obs), tuple(dones), tuple(valid), tuple(searched))


# --- the retrieval API (Search-R1 retrieval_server.py; DESIGN.md "API") -------------------------------------------

RETRIEVE_PATH = "/retrieve"
RETRIEVE_DEFAULT_TOPK = 3  # the server's --topk default, used when a request's topk is null
QUERIES_FIELD = "queries"
TOPK_FIELD = "topk"
RETURN_SCORES_FIELD = "return_scores"
RESULT_FIELD = "result"
DOCUMENT_FIELD = "document"
SCORE_FIELD = "score"
DOC_ID_FIELD = "id"
DOC_CONTENTS_FIELD = "contents"
# How wiki-18 rows spell contents: a quoted title line, a newline, the text.
CONTENTS_LAYOUT = '"Title"\\ntext'


@dataclass(frozen=True, slots=True)
class RetrievalRequest:
    """``QueryRequest(queries: List[str], topk: Optional[int] = None, return_scores: bool = False)``."""

    queries: tuple[str, ...]
    topk: int | None = None
    return_scores: bool = False

    @property
    def effective_topk(self) -> int:
        return RETRIEVE_DEFAULT_TOPK if self.topk is None else self.topk

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> RetrievalRequest:
        """Validate a request body; a ``ValueError`` names the first bad field (unknown fields are ignored, as
        pydantic does by default)."""
        queries = payload.get(QUERIES_FIELD)
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise ValueError(f"{QUERIES_FIELD!r} must be a list of strings")
        topk = payload.get(TOPK_FIELD)
        if topk is not None and (isinstance(topk, bool) or not isinstance(topk, int) or topk < 1):
            raise ValueError(f"{TOPK_FIELD!r} must be a positive integer or null")
        return_scores = payload.get(RETURN_SCORES_FIELD, False)
        if not isinstance(return_scores, bool):
            raise ValueError(f"{RETURN_SCORES_FIELD!r} must be a boolean")
        return cls(tuple(queries), topk, return_scores)

    def to_json(self) -> dict[str, Any]:
        return {
            QUERIES_FIELD: list(self.queries),
            TOPK_FIELD: self.topk,
            RETURN_SCORES_FIELD: self.return_scores,
        }


@dataclass(frozen=True, slots=True)
class RetrievedDocument:
    id: str
    contents: str
    score: float


def _document_json(doc_id: Any, contents: Any) -> dict[str, Any]:
    return {DOC_ID_FIELD: doc_id, DOC_CONTENTS_FIELD: contents}


def _hit_json(document: dict[str, Any], score: Any) -> dict[str, Any]:
    return {DOCUMENT_FIELD: document, SCORE_FIELD: score}


def retrieval_response(
    results: Sequence[Sequence[RetrievedDocument]], *, return_scores: bool
) -> dict[str, Any]:
    """The server's reply: per query, ``{"document": {"id", "contents"}, "score"}`` items, or bare documents
    when scores were not asked for."""
    rows: list[list[dict[str, Any]]] = []
    for hits in results:
        docs = [(_document_json(hit.id, hit.contents), hit.score) for hit in hits]
        rows.append([_hit_json(doc, score) if return_scores else doc for doc, score in docs])
    return {RESULT_FIELD: rows}


def parse_retrieval_response(payload: Mapping[str, Any]) -> list[list[RetrievedDocument]]:
    """Read a ``/retrieve`` reply of either shape (a document without a score gets ``nan``, never a made-up 0)."""
    parsed: list[list[RetrievedDocument]] = []
    for hits in payload[RESULT_FIELD]:
        row: list[RetrievedDocument] = []
        for hit in hits:
            document = hit.get(DOCUMENT_FIELD, hit)
            score = float(hit[SCORE_FIELD]) if SCORE_FIELD in hit else float("nan")
            row.append(
                RetrievedDocument(str(document[DOC_ID_FIELD]), str(document[DOC_CONTENTS_FIELD]), score)
            )
        parsed.append(row)
    return parsed


def retrieval_schema() -> dict[str, Any]:
    """The documented ``/retrieve`` reply shape (placeholders for values), built from the same field names as
    :func:`retrieval_response` (vector ``searchr1.retrieval_server.request_response_schema``)."""
    with_scores = [[_hit_json(_document_json("<corpus id>", CONTENTS_LAYOUT), "<float>")]]
    without_scores = [[_document_json("...", "...")]]
    return {RESULT_FIELD: with_scores, "without_return_scores": {RESULT_FIELD: without_scores}}
