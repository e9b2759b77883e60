"""Adapters for rollout.jsonl (Search-R1 ``generation.py`` and retrieval server, FlashRAG ``SearchR1Pipeline``,
HiPRAG ``generation.py``; REFERENCE.md §c)."""

from __future__ import annotations

from typing import Any

from scoring.conformance import Adapter
from scoring.observations import (
    RetrievalRequest,
    execute_predictions,
    flashrag_information_block,
    parse_action,
    passages_to_string,
    retrieval_schema,
    truncate_response,
)


def _postprocess_responses(record: dict[str, Any]) -> list[str]:
    return [truncate_response(text) for text in record["responses_str"]]


def _postprocess_predictions(record: dict[str, Any]) -> list[list[Any]]:
    parsed = [parse_action(text) for text in record["predictions"]]
    return [[action for action, _ in parsed], [content for _, content in parsed]]


def _passages2string(record: dict[str, Any]) -> str:
    return passages_to_string(hit["document"]["contents"] for hit in record["retrieval_result"])


def _retrieved_docs_to_string(record: dict[str, Any]) -> str:
    return flashrag_information_block(doc["contents"] for doc in record["retrieved_docs"])


def _execute(record: dict[str, Any], style: Any) -> list[list[Any]]:
    result = execute_predictions(
        record["predictions"], record["active_mask"], record["search_results_formatted"], style
    )
    return [list(result.next_obs), list(result.dones), list(result.valid_action), list(result.is_search)]


def _searchr1_execute(record: dict[str, Any]) -> list[list[Any]]:
    return _execute(record, "search_r1")


def _hiprag_execute(record: dict[str, Any]) -> list[list[Any]]:
    return _execute(record, "hiprag")


def _schema(record: dict[str, Any]) -> dict[str, Any]:
    # The record's input is an example request; it must be one our request model accepts.
    RetrievalRequest.from_json(record["POST /retrieve"])
    return retrieval_schema()


ADAPTERS: dict[str, Adapter] = {
    "searchr1.LLMGenerationManager._postprocess_responses": _postprocess_responses,
    "searchr1.LLMGenerationManager.postprocess_predictions": _postprocess_predictions,
    "searchr1.LLMGenerationManager._passages2string": _passages2string,
    "flashrag.SearchR1Pipeline._retrieved_docs_to_string": _retrieved_docs_to_string,
    "searchr1.LLMGenerationManager.execute_predictions": _searchr1_execute,
    "hiprag.LLMGenerationManager.execute_predictions": _hiprag_execute,
    "searchr1.retrieval_server.request_response_schema": _schema,
}
