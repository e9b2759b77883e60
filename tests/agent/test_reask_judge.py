"""HiPRAG's own over-search test as a judge (Sec. 3.2): re-ask the query without retrieval, compare with the step's
conclusion — lexically (no LLM), or with Fig. 5's prompt through a judge client; the query re-asked to the policy
or to an OpenAI-compatible endpoint. Failures are ERROR verdicts, never "no"."""

from __future__ import annotations

from typing import Any

from agent.evaluate import Judges, evaluate_sync
from agent.judge_client import JudgeEndpoint, OpenAIJudge
from agent.rollout import Question
from scoring.judging.hiprag import REGENERATION_TEMPLATE
from scoring.judging.reask import lexical_equivalence
from scoring.verdicts import Verdict
from tests.agent.conftest import Reply, ScriptedBackend, ScriptedServer
from tests.agent.test_rollout import hiprag_policy

QUESTION = Question("q1", "What is the capital of France", ("Paris",), "demo", supporting_titles=("Paris",))
REASK = REGENERATION_TEMPLATE.split("{")[0]


def knowing_policy(answer: str) -> Any:
    """The HiPRAG policy, answering a re-asked query with ``answer``."""

    def script(text: str) -> str:
        return answer if REASK in text else hiprag_policy(text)

    return script


def endpoint(server: ScriptedServer, model: str = "served-m") -> OpenAIJudge:
    return OpenAIJudge(
        JudgeEndpoint(base_url=server.base_url, model=model, timeout=5.0, max_retries=2, backoff_base=0.01)
    )


def test_the_lexical_match_reads_what_the_conclusion_says() -> None:
    assert (
        lexical_equivalence("Paris is the capital of France.", "The capital of France is Paris.")
        is Verdict.TRUE
    )
    assert lexical_equivalence("Paris is the capital of France.", "I am not sure.") is Verdict.FALSE
    assert lexical_equivalence("It is.", "Paris") is Verdict.FALSE  # a conclusion that asserts nothing


def test_the_policy_re_asked_flags_a_search_it_did_not_need(searcher: Any) -> None:
    result = evaluate_sync(
        ScriptedBackend(knowing_policy("Paris is the capital of France.")),
        searcher,
        "hiprag",
        [QUESTION],
        judges=Judges(evidence=True, reask=True),
    )
    [record] = result.records
    [over] = record.verdicts["over_search"]
    # The evidence heuristic would say FALSE (the search brought the supporting passage); the re-ask test says the
    # policy knew: over-search.
    assert (over.verdict, over.model, over.regenerated) == (
        Verdict.TRUE,
        "reask-lexical",
        "Paris is the capital of France.",
    )
    assert record.reward is not None and record.reward.components["n_over"] == 1.0
    assert result.judge_stats == {}  # no LLM call at all

    unknowing = evaluate_sync(
        ScriptedBackend(knowing_policy("I do not know.")),
        searcher,
        "hiprag",
        [QUESTION],
        judges=Judges(evidence=True, reask=True),
    )
    assert unknowing.records[0].verdicts["over_search"][0].verdict is Verdict.FALSE


def test_an_endpoint_re_asks_and_judges_with_hiprags_prompt(server: ScriptedServer, searcher: Any) -> None:
    def responder(body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"]
        if text.startswith(REASK):
            return "The capital of France is Paris."
        assert "semantically equivalent" in text and "Statement 2: The capital of France is Paris." in text
        return "<answer>True</answer>"

    server.responder = responder
    client = endpoint(server)
    result = evaluate_sync(
        ScriptedBackend(hiprag_policy),
        searcher,
        "hiprag",
        [QUESTION],
        judges=Judges(judge=client, evidence=True, reask=True, regenerator=client),
    )
    [over] = result.records[0].verdicts["over_search"]
    assert (over.verdict, over.model, over.regenerated) == (
        Verdict.TRUE,
        "served-m",
        "The capital of France is Paris.",
    )
    assert len(server.requests) == 2  # one re-ask, one equivalence call
    assert result.records[0].verdicts["under_search"] == []  # the trajectory has no non-search step


def test_a_failed_re_ask_is_an_error_verdict_not_a_no(server: ScriptedServer, searcher: Any) -> None:
    server.responder = lambda body: Reply(status=503)
    result = evaluate_sync(
        ScriptedBackend(hiprag_policy),
        searcher,
        "hiprag",
        [QUESTION],
        judges=Judges(evidence=True, reask=True, regenerator=endpoint(server)),
    )
    [record] = result.records
    [over] = record.verdicts["over_search"]
    assert over.verdict is Verdict.ERROR and "regeneration failed" in (over.error or "")
    assert len(server.requests) == 3  # the first try and its 2 retries
    assert record.reward is None and "over-search verdict is error" in (record.reward_error or "")
    assert result.report.overall_micro.n_judge_errors == 1
