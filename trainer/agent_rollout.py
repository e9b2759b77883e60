"""Real search rollouts for training: agent/'s per-method loops and judges behind :class:`trainer.rollout.RolloutFn`.

Selected with ``rollout.factory = "agent"``. Each generation batch runs the same pipeline an evaluation run does
(:func:`agent.evaluate.evaluate`: the method's rollout loop against the search engine, then its judges, overlapped)
with the policy being trained as the generation backend, so training and evaluation can never disagree on a
prompt, a tag or a judge. ``rollout.options``:

* ``index`` (a folder built by ``retrieval.index.build_index``) or ``retrieve_url`` (a Search-R1 ``/retrieve``
  server) — the search engine; one is required.
* ``judge`` — ``{"base_url", "model", "api_key_env", ...}`` for an OpenAI-compatible judge
  (:class:`agent.judge_client.JudgeEndpoint` fields), ``"policy"`` to let the policy judge itself (a CPU demo
  only: the papers use an external judge), or ``"evidence"`` for HiPRAG's heuristic evidence judge
  (:mod:`scoring.judging.evidence`: the dataset's supporting titles and the trajectory, no LLM), or ``"reask"`` for
  HiPRAG's own over-search test (the policy re-asked each query without retrieval, its answer matched with the
  step's conclusion by :mod:`scoring.judging.reask`; under-search by the evidence rules) — or an endpoint dict with
  ``"reask": "policy" | "endpoint"`` to judge that match with Fig. 5's prompt (and, with ``"endpoint"``, to re-ask
  the endpoint's model). Without a judge, HiPRAG's bonus, TIRESRAG's sufficiency/thinking and
  Search-P1's evaluator are missing, and the reward adapter gives those samples no advantage (never a silent "no").
* a budget under :class:`agent.rollout.RolloutConfig`'s name (``max_turns``, ``max_new_tokens``,
  ``max_rollout_tokens``, ``max_obs_tokens``, ``topk``: :data:`agent.budgets.BUDGET_BY_ROLLOUT_NAME`) — overrides
  the config's budget (older configs), checked against the range :class:`agent.budgets.RolloutBudgets` declares.

``rollout.engine`` picks what generates: ``transformers`` (the policy module in this process) or ``vllm`` — the
trainer's own vLLM engine (TRL's ``use_vllm``; :func:`trainer.train.build_trainer` hands this object the trainer),
whose weights TRL syncs from the policy before each rollout batch: the colocated ``vllm.LLM`` through
:class:`agent.backend_vllm.VLLMBackend`, or ``trl vllm-serve`` through :class:`agent.backend_vllm.VLLMClientBackend`
(one training process). Either way every active trajectory of the batch generates in one engine call per turn, the
segments carry the sampled token ids, and with vLLM their sampled log-probs too (TRL's importance-sampling
correction), so ``env_mask`` is built the same way for both engines.

Budgets come from the config's ``rollout`` section (turns, tokens per turn, tokens per rollout, observation tokens,
top-k), so the form, ``python -m trainer.train`` and evaluation apply the same ones; a rollout a budget ends
records which (``end``: ``budget:turns`` …) in its sample. With a :class:`trainer.progress.ProgressReporter` set as
``progress``, each turn, retrieval and judge call is reported, then the ``update`` phase begins as the rollouts
are handed to TRL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from agent.budgets import BUDGET_BY_ROLLOUT_NAME, BudgetError, check_budget
from agent.judge_client import JudgeCostMeter
from trainer.config import ConfigError, RunConfig
from trainer.rollout import Rollout, RolloutRequest, Segment

POLICY_JUDGE_TOKENS = 48


def option_budgets(options: Mapping[str, Any]) -> dict[str, int]:
    """The budgets ``rollout.options`` sets, by :class:`agent.rollout.RolloutConfig`'s names (every budget
    :class:`agent.budgets.RolloutBudgets` declares), each an integer in its declared range, else
    :class:`~trainer.config.ConfigError` naming ``rollout.options.<name>``."""
    found: dict[str, int] = {}
    for name, budget_name in BUDGET_BY_ROLLOUT_NAME.items():
        if name not in options:
            continue
        value = options[name]
        field_name = f"rollout.options.{name}"
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(field_name, f"must be an integer, got {value!r}")
        try:
            check_budget(budget_name, value, field_name=field_name)
        except BudgetError as exc:
            raise ConfigError(exc.field, exc.message) from None
        found[name] = value
    return found


def _searcher(options: Mapping[str, Any]) -> Any:
    if options.get("index"):
        from retrieval.api import searcher_for_index

        return searcher_for_index(str(options["index"]))
    if options.get("retrieve_url"):
        from retrieval.client import RemoteSearcher

        return RemoteSearcher(str(options["retrieve_url"]))
    raise ConfigError("rollout.options", "the 'agent' rollout needs 'index' (a folder) or 'retrieve_url'")


class AgentRollout:
    """Roll out a generation batch with agent/ and hand the trainer token segments and judge outcomes."""

    def __init__(
        self,
        method: str,
        tokenizer: Any,
        searcher: Any,
        options: Mapping[str, Any],
        budgets: Mapping[str, int] | None = None,
        engine: str = "transformers",
        temperature: float | None = None,
    ) -> None:
        from agent.rollout import PAPER_CONFIGS

        self.engine = engine
        self.trainer: Any = (
            None  # the GRPOTrainer, set by trainer.train.build_trainer (the vLLM engine is on it)
        )
        self.method = method
        self.tokenizer = tokenizer
        self.searcher = searcher
        self.judge_option = options.get("judge")
        self.progress: Any = None  # a trainer.progress.ProgressReporter, set by trainer.train.build_trainer
        # Each batch's judge calls, errors, tokens and seconds, until the metrics callback takes them (judge/*).
        self.judge_cost = JudgeCostMeter()
        overrides: dict[str, Any] = {**(budgets or {}), **option_budgets(options)}
        # Training samples at the run's training.temperature, the one TRL scales the policy's logits by when it
        # recomputes their log-probs (else the method's paper's, else 1), unlike evaluation's greedy.
        base = PAPER_CONFIGS[method]
        self.config = dataclasses.replace(
            base, temperature=temperature or base.temperature or 1.0, **overrides
        )

    def _judges(self, backend: Any) -> Any:
        """The rollout's judges from ``rollout.options.judge`` (agent.judge_spec: its kinds and builder). The CPU
        demo's self-judge answers in at most POLICY_JUDGE_TOKENS: its verdicts are a few tokens, and a rambling
        reply would cost the step 256 tokens of generation per call (a reply cut before its verdict is unparseable,
        not "no")."""
        from agent.judge_spec import JudgeSpec, build_judges

        spec = JudgeSpec.from_rollout_option(self.judge_option)
        return build_judges(spec, backend, policy_max_new_tokens=POLICY_JUDGE_TOKENS)

    def __call__(self, requests: Sequence[RolloutRequest], policy: Any) -> list[Rollout]:
        from agent.backend_transformers import TransformersBackend
        from agent.evaluate import evaluate_sync, record_judgements
        from agent.rollout import Question

        was_training = policy.training
        if self.engine == "vllm":
            backend = self._vllm_backend()
        else:
            # A new backend per batch (it sets eval mode for generation): its cache of the prompts' shared prefix
            # must not outlive the weights it was computed with, and the policy changes every step.
            backend = TransformersBackend(policy, self.tokenizer, threads=None)
        try:
            questions = [
                Question(
                    id=f"{request.row.get('id', 'q')}#{request.index}",
                    text=str(request.row.get("question", request.prompt)),
                    golds=tuple(str(g) for g in request.row.get("golden_answers", ())),
                    dataset=str(request.row.get("dataset", "")),
                    supporting_titles=tuple(str(t) for t in request.row.get("supporting_titles") or ()),
                )
                for request in requests
            ]
            result = evaluate_sync(
                backend,
                self.searcher,
                self.method,
                questions,
                judges=self._judges(backend),
                config=self.config,
                progress=self.progress,
            )
        finally:
            policy.train(was_training)
        # One JudgeStats per LLM judge of the batch; none for a heuristic judge (no call, nothing added).
        for stats in result.judge_stats.values():
            self.judge_cost.add(stats)
        if self.progress is not None:
            self.progress.update("update", 0, 0, "scoring rewards, then the policy update")
        return [self._rollout(record, record_judgements(self.method, record)) for record in result.records]

    def _vllm_backend(self) -> Any:
        """The trainer's vLLM engine as an agent backend (its weights were synced by TRL just before this call)."""
        from agent.backend_vllm import VLLMBackend, VLLMClientBackend

        generation = getattr(self.trainer, "vllm_generation", None)
        if generation is None:
            raise RuntimeError("rollout.engine = 'vllm' needs a trainer built with use_vllm (trainer.train)")
        if getattr(generation, "llm", None) is not None:  # colocate
            return VLLMBackend.from_llm(generation.llm, name="vllm-colocate")
        if getattr(generation, "vllm_client", None) is None:
            raise RuntimeError("vLLM server mode runs the agent rollout in one training process only")
        return VLLMClientBackend(generation.vllm_client, self.tokenizer)

    def _encode(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer.encode(text, add_special_tokens=False))

    def _rollout(self, record: Any, judgements: Mapping[str, Any]) -> Rollout:
        segments = []
        for piece in record.rollout.segments:
            if piece.source == "model":
                ids = tuple(piece.token_ids) if piece.token_ids is not None else self._encode(piece.text)
                logprobs = tuple(piece.logprobs) if piece.logprobs is not None else None
                if logprobs is not None and len(logprobs) != len(ids):
                    logprobs = None
                segments.append(Segment(ids, True, piece.text, logprobs))
            else:
                segments.append(Segment(self._encode(piece.text), False, piece.text))
        if not any(s.is_model and s.token_ids for s in segments):
            # an empty generation still needs one policy token to train on: the end-of-sequence it chose (its
            # sampling log-prob unknown: NaN, which TRL's importance-sampling correction treats as ratio 1)
            unknown = (float("nan"),) if self.engine == "vllm" else None
            segments.append(Segment((int(self.tokenizer.eos_token_id),), True, "", unknown))
        return Rollout(
            prompt_ids=self._encode(record.rollout.prompt),
            segments=tuple(segments),
            text=record.rollout.text,
            judgements={k: v for k, v in judgements.items() if v is not None},
            extras={
                "n_searches": record.rollout.n_searches,
                "end": record.rollout.end,
                "cut_turns": record.rollout.cut_turns,
            },
        )


def budgets(config: RunConfig) -> dict[str, int]:
    """agent.rollout.RolloutConfig's budget fields from the run config's ``rollout`` section."""
    return config.agent_budgets()


def build(config: RunConfig, model: Any, tokenizer: Any) -> AgentRollout:
    """``rollout.factory = "agent"``: (RunConfig, model, tokenizer) → RolloutFn."""
    return AgentRollout(
        config.method,
        tokenizer,
        _searcher(config.rollout.options),
        config.rollout.options,
        budgets=budgets(config),
        engine=config.rollout.engine,
        temperature=config.training.temperature,
    )
