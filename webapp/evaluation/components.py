"""The moving parts of an evaluation run, built from its spec: policy backend, searcher, judges.

Heavy libraries (torch, transformers, faiss, openai) are imported by agent/ and retrieval/ only when these are
called, in the worker. Tests replace :func:`build_backend` and :func:`build_searcher` with a scripted policy and a
keyword searcher.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.backends import BackendConfig, GenerationBackend, make_backend
from agent.evaluate import Judges
from agent.judge_client import JudgeEndpoint
from agent.judge_spec import build_judges as agent_build_judges
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
    """The run's judges (agent.judge_spec.build_judges); ``cache_for(model)`` gives the judge cache of a judge model
    (one per model). A served policy judging itself is asked through its own endpoint."""
    policy_endpoint = None
    if spec.backend == "openai":
        policy_endpoint = JudgeEndpoint(
            base_url=spec.base_url,
            model=spec.model,
            api_key_env=spec.api_key_env or None,
            timeout=spec.judge.timeout,
            concurrency=spec.judge.concurrency,
        )
    return agent_build_judges(
        spec.judge,
        policy,
        policy_endpoint=policy_endpoint,
        cache_for=cache_for,
        plans_for=PrefetchedPlanStore,
    )
