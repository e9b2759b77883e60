"""The moving parts of an evaluation run, built from its spec: policy backend, searcher, judges.

Heavy libraries (torch, transformers, faiss, openai) are imported by agent/ and retrieval/ only when these are
called, in the worker. Tests replace :func:`build_backend` and :func:`build_searcher` with a scripted policy and a
keyword searcher.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.backends import BackendConfig, GenerationBackend, make_backend
from agent.evaluate import Judges
from agent.judge_client import ChatJudge, JudgeEndpoint, OpenAIJudge, TransformersJudge
from retrieval.searcher import Searcher
from webapp.corpora.models import Index
from webapp.evaluation.specs import EvaluationConfigError, EvaluationSpec
from webapp.evaluation.stores import PrefetchedJudgeCache, PrefetchedPlanStore


def build_backend(spec: EvaluationSpec) -> GenerationBackend:
    if spec.backend == "vllm":
        # vLLM in the worker's process (its engine core in a child): on this CPU about 4× the transformers
        # engine's rollouts per second, mostly from prefix caching of the shared prompt (docs/vllm.md).
        from agent.backend_vllm import VLLMBackend

        return VLLMBackend.for_device(spec.model)
    return make_backend(
        BackendConfig(
            kind="openai" if spec.backend == "openai" else "transformers",
            model=spec.model,
            base_url=spec.base_url or None,
            api_key_env=spec.api_key_env or None,
        )
    )


def build_searcher(spec: EvaluationSpec) -> Searcher:
    if spec.retrieve_url:
        from retrieval.client import RemoteSearcher

        return RemoteSearcher(spec.retrieve_url)
    index = Index.objects.filter(pk=spec.index_id).first()
    if index is None:
        raise EvaluationConfigError("index", f"index {spec.index_id} no longer exists")
    if index.status != Index.Status.READY or not index.path:
        raise EvaluationConfigError("index", f"index {index} is {index.status}, not ready")
    from retrieval.api import searcher_for_index

    return searcher_for_index(index.path)


def build_judges(
    spec: EvaluationSpec,
    policy: GenerationBackend,
    cache_for: Callable[[str], PrefetchedJudgeCache],
) -> Judges:
    """The run's judges; ``cache_for(model)`` gives the judge cache of a judge model (one per model)."""
    settings = spec.judge
    judge: ChatJudge | None = None
    if settings.kind == "openai" or (settings.kind == "policy" and spec.backend == "openai"):
        endpoint = JudgeEndpoint(
            base_url=settings.base_url if settings.kind == "openai" else spec.base_url,
            model=settings.model if settings.kind == "openai" else spec.model,
            api_key_env=(settings.api_key_env if settings.kind == "openai" else spec.api_key_env) or None,
            timeout=settings.timeout,
            concurrency=settings.concurrency,
        )
        judge = OpenAIJudge(endpoint, cache=cache_for(endpoint.model))
    elif settings.kind == "policy":
        # The in-process policy judges itself: TransformersJudge batches concurrent requests into chat() calls.
        transformers_judge = TransformersJudge(policy)
        transformers_judge.cache = cache_for(transformers_judge.model)
        judge = transformers_judge
    if settings.kind == "evidence":  # HiPRAG's heuristic detectors (scoring.judging.evidence): no LLM
        return Judges(plans=PrefetchedPlanStore(""), evidence=True)
    # HiPRAG's over-search test (Sec. 3.2) on the policy, lexical match: no LLM judge.
    if settings.kind == "reask":
        return Judges(plans=PrefetchedPlanStore(""), evidence=True, reask=True)
    if judge is None:
        return Judges(plans=PrefetchedPlanStore(""))
    return Judges(
        judge=judge,
        answer_judge=judge if settings.answer_judge else None,
        plans=PrefetchedPlanStore(judge.model),
    )
