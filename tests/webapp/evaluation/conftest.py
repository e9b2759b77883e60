"""An evaluation without models or indexes: a scripted policy, a keyword searcher, a local scripted judge server.

The policy answers every question "Paris" in HiPRAG's format with one search step and one non-search step; the
judge says every search was unnecessary (over-search TRUE) and fails every under-search call with HTTP 400, so
each trajectory holds a TRUE verdict and an ERROR verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent.conftest import PASSAGES, KeywordSearcher, Reply, ScriptedBackend, ScriptedServer
from tests.agent.test_evaluate import judge_responder
from tests.agent.test_rollout import POLICIES, response
from tests.webapp.factories import DatasetFactory, QuestionFactory
from webapp.evaluation import components
from webapp.evaluation.specs import EvaluationSpec, JudgeSpec


def hiprag_two_steps(text: str) -> str:
    if "Please answer the following question" in text:
        return "Paris is the capital of France."  # HiPRAG's regeneration o'_i, for the over-search judge
    r = response(text)
    if "<context>" not in r:
        return " I should look it up.</reasoning>\n    <search>capital of France</search>"
    if r.endswith("<conclusion>"):
        return "Paris is the capital of France.</conclusion>"
    if r.count("<step>") == 1:
        return (
            "\n<step>\n    <reasoning>So the answer is Paris.</reasoning>\n    <conclusion>Paris</conclusion>"
        )
    return "\n</think>\n<answer>Paris</answer>"


def failing_under_search_judge(body: dict[str, Any]) -> str | Reply:
    text = "\n".join(m["content"] for m in body["messages"])
    if "semantically equivalent" in text:
        return "<answer>True</answer>"  # the regenerated answer matches: the search was unnecessary
    return Reply(status=400)  # a bad request is not retried: an ERROR verdict at once


@pytest.fixture
def judge_server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    scripted.responder = failing_under_search_judge
    yield scripted
    scripted.close()


@pytest.fixture
def fake_components(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[str], str]], ScriptedBackend]:
    """Swap the policy and the searcher for scripted ones; returns a setter for the policy script."""
    searcher = KeywordSearcher(PASSAGES)
    holder: dict[str, ScriptedBackend] = {"backend": ScriptedBackend(hiprag_two_steps)}
    monkeypatch.setattr(components, "build_backend", lambda spec: holder["backend"])
    monkeypatch.setattr(components, "build_searcher", lambda spec: searcher)

    def use(policy: Callable[[str], str]) -> ScriptedBackend:
        holder["backend"] = ScriptedBackend(policy)
        return holder["backend"]

    return use


@pytest.fixture
def datasets(db: Any) -> tuple[Any, Any]:
    nq = DatasetFactory(name="nq")
    hotpot = DatasetFactory(name="hotpotqa")
    for i in range(2):
        QuestionFactory(dataset=nq, external_id=f"nq{i}", text="What is the capital of France")
    QuestionFactory(dataset=hotpot, external_id="h0", text="Which city is the capital of France")
    return nq, hotpot


def spec_for(
    tmp_path: Path, dataset_ids: tuple[int, ...], judge_url: str, method: str = "hiprag", **extra: Any
) -> EvaluationSpec:
    return EvaluationSpec(
        method=method,
        model=str(tmp_path),  # a folder: passes the check; the scripted backend stands in for the model
        dataset_ids=dataset_ids,
        retrieve_url="http://127.0.0.1:9/retrieve",  # never called: the keyword searcher stands in
        judge=JudgeSpec(kind="openai", base_url=judge_url, model="judge-m", timeout=5.0),
        **extra,
    )


__all__ = ["POLICIES", "judge_responder", "spec_for"]
