"""searchlab's rewards as a veRL reward function: ``compute_score(data_source, solution_str, ground_truth, extra_info)``.

veRL (0.9.1) calls a custom reward function per sample from its ``naive`` reward manager and per batch from its
``batch`` manager; both are here::

    custom_reward_function.path=trainer/verl_reward.py
    custom_reward_function.name=compute_score          # reward_model.reward_manager=naive
    custom_reward_function.name=compute_score_batch    # reward_model.reward_manager=batch (judges batched)
    +custom_reward_function.reward_kwargs.method=hiprag
    +custom_reward_function.reward_kwargs.judge=evidence   # or {base_url, model, api_key_env}

Scoring is :mod:`scoring` — :func:`scoring.scorer.score_batch` in paper mode (every method), or the released code's
reward in reference mode (``mode=reference``: Search-R1's ``compute_score_em`` and HiPRAG's ``compute_score_em``).
Judge verdicts come from :mod:`agent.judges`: the evidence heuristic (no call) for HiPRAG's and Search-R1's
detectors, or an OpenAI-compatible judge server (vLLM, by URL) for HiPRAG's under-search verifier, TIRESRAG's
sufficiency and thinking judges and Search-P1's reference plan and path evaluator; a batch's judge calls all run
concurrently in one event loop. HiPRAG's over-search detector regenerates with the *policy*, which a reward
function does not have: over-search flags come from the evidence heuristic here (documented in docs/scale.md).

The result is a dict: ``score`` (what veRL trains on) plus ``searchlab``, a JSON string with the parsed steps,
reward components, step rewards and verdicts. veRL keeps every key of the dict as ``reward_extra_info`` and writes
it into its rollout dumps (``trainer.rollout_data_dir``), where :mod:`trainer.verl_follower` reads it back, so
searchlab stores the same steps and verdicts veRL trained on.

Per-sample settings may also come in ``extra_info["searchlab"]`` (``method``, ``mode``, ``params``, ``question``,
``supporting_titles``); veRL's Search-R1 data puts the question in ``extra_info`` and the answers in
``ground_truth = {"target": [...]}``, both read here. Standard library and searchlab only: no veRL import.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from scoring.scorer import METHODS, BatchItem, Scored, score_batch
from scoring.trajectory import Trajectory
from scoring.verdicts import Verdict

MODES = ("paper", "reference")
_PLANS: Any = None  # Search-P1's reference plans, one per question for the life of the process (Algorithm 1)
REFERENCE_METHODS = ("search_r1", "hiprag")


def golds_of(ground_truth: Any) -> list[str]:
    """veRL's ``reward_model.ground_truth``: a string, a list, or Search-R1's ``{"target": [...]}`` (numpy arrays
    in veRL's parquet rows arrive as lists or arrays; anything iterable of strings is taken)."""
    if isinstance(ground_truth, Mapping):
        ground_truth = ground_truth.get(
            "target", ground_truth.get("answers", ground_truth.get("golden_answers"))
        )
    if isinstance(ground_truth, str):
        return [ground_truth]
    if ground_truth is None:
        return []
    if hasattr(ground_truth, "tolist"):
        ground_truth = ground_truth.tolist()
    return [str(g) for g in ground_truth] if isinstance(ground_truth, list | tuple) else [str(ground_truth)]


def _settings(extra_info: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    own = extra_info.get("searchlab") if isinstance(extra_info, Mapping) else None
    merged = {**kwargs, **(own if isinstance(own, Mapping) else {})}
    method = str(merged.get("method") or "search_r1")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    mode = str(merged.get("mode") or "paper")
    if mode not in MODES:
        raise ValueError(f"mode must be 'paper' or 'reference', got {mode!r}")
    if mode == "reference" and method not in REFERENCE_METHODS:
        raise ValueError(
            f"mode 'reference' is available for {', '.join(REFERENCE_METHODS)}; {method} scores in paper mode"
        )
    return {**merged, "method": method, "mode": mode}


def _question(extra_info: Any) -> tuple[str, list[str]]:
    info: Mapping[str, Any] = extra_info if isinstance(extra_info, Mapping) else {}
    own_value = info.get("searchlab")
    own: Mapping[str, Any] = own_value if isinstance(own_value, Mapping) else {}
    question = own.get("question") or info.get("question") or ""
    titles = own.get("supporting_titles") or info.get("supporting_titles") or []
    return str(question), [str(t) for t in titles]


def _make_judge(spec: Any) -> Any:
    """``evidence`` / None → no LLM judge; a mapping → an OpenAI-compatible judge by URL; a ChatJudge as is."""
    if spec is None or spec in ("", "evidence", "none"):
        return None
    if isinstance(spec, str):
        spec = json.loads(spec)
    if isinstance(spec, Mapping):
        from agent.judge_client import JudgeEndpoint, OpenAIJudge

        return OpenAIJudge(JudgeEndpoint(**dict(spec)))
    return spec


async def _judge_one(
    method: str,
    trajectory: Trajectory,
    question: str,
    golds: Sequence[str],
    titles: Sequence[str],
    judge: Any,
) -> dict[str, Any]:
    """The scorer's judgements for one trajectory, and the verdicts to store: {"judgements", "verdicts"}."""
    from agent import judges as det

    global _PLANS
    if _PLANS is None:
        _PLANS = det.InMemoryPlanStore()
    verdicts: dict[int, list[dict[str, str]]] = {}
    judgements: dict[str, Any] = {}

    def keep(results: Sequence[Any]) -> None:
        for r in results:
            if r.step_index is not None and r.verdict is not None:
                verdicts.setdefault(r.step_index, []).append(
                    {"detector": r.detector, "outcome": r.verdict.value}
                )

    if method in ("hiprag", "search_r1") and trajectory.valid:
        found = det.hiprag_evidence(trajectory, question, golds, titles)
        if method == "hiprag" and judge is not None:
            found[det.UNDER_SEARCH] = await det.hiprag_under_search(judge, trajectory)
        if method == "search_r1":
            found = {det.OVER_SEARCH: found[det.OVER_SEARCH]}
        for results in found.values():
            keep(results)
        if method == "hiprag":
            flags: list[str] = []
            by_step = {r.step_index: r.verdict for results in found.values() for r in results}
            for i in range(len(trajectory.steps)):
                flag = by_step.get(i)
                if flag is None:
                    break
                flags.append(flag.value)
            judgements["step_flags"] = flags
    elif method == "tiresrag" and judge is not None:
        sufficiency, thinking = await asyncio.gather(
            det.tiresrag_sufficiency(judge, question, golds, trajectory),
            det.tiresrag_thinking(judge, question, trajectory),
        )
        if sufficiency.verdict is not None:
            judgements["sufficiency"] = sufficiency.verdict.value
        judgements["thinking"] = thinking.score if thinking.verdict is None else thinking.verdict.value
    elif method == "search_p1" and judge is not None:
        from scoring.judging.searchp1 import ReferencePlan
        from scoring.rewards.searchp1 import SearchP1Evaluation

        plan = await det.searchp1_reference_plan(judge, _PLANS, question, question, golds)
        reference = plan.value if isinstance(plan.value, ReferencePlan) else None
        path = await det.searchp1_evaluate(judge, question, golds, reference, trajectory.text)
        evaluation = path.value if path.verdict is None else None
        if evaluation is not None:
            judgements["evaluation"] = {
                n: getattr(evaluation, n) for n in SearchP1Evaluation.__dataclass_fields__
            }
        judgements["n_ref_steps"] = len(reference.path) if reference else None
    elif method == "autosearch":
        judgements["intermediate_answers"] = []  # self-answering needs the policy (veRL's actor), not a judge
    return {"judgements": {k: v for k, v in judgements.items() if v is not None}, "verdicts": verdicts}


async def _judge_all(
    items: Sequence[tuple[str, Trajectory, str, list[str], list[str]]], judge: Any
) -> list[Any]:
    return list(await asyncio.gather(*(_judge_one(m, t, q, g, s, judge) for m, t, q, g, s in items)))


def _run(coroutine: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    import concurrent.futures  # called from inside a running loop (an async reward loop): a thread of its own

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _detail(
    method: str, mode: str, scored: Scored | None, verdicts: Mapping[int, Any], error: str | None
) -> str:
    steps = []
    if scored is not None:
        rewards = scored.reward.step_rewards
        for i, step in enumerate(scored.trajectory.steps):
            steps.append(
                {
                    "index": step.index,
                    "kind": step.kind.value,
                    "reward": rewards[i] if i < len(rewards) else None,
                    "verdicts": list(verdicts.get(step.index, ())),
                }
            )
    return json.dumps(
        {
            "method": method,
            "mode": mode,
            "format_ok": scored.trajectory.valid if scored is not None else None,
            "components": dict(scored.reward.components) if scored is not None else {},
            "step_rewards": list(scored.reward.step_rewards) if scored is not None else [],
            "steps": steps,
            "error": error,
        }
    )


def _reference_score(
    method: str, text: str, golds: Sequence[str], judgements: Mapping[str, Any], params: Mapping[str, Any]
) -> float:
    from scoring.rewards import hiprag as hiprag_rewards
    from scoring.rewards import searchr1

    if method == "search_r1":
        return float(searchr1.searchr1_em_reward_reference(text, golds, **dict(params)))
    flags = [flag == Verdict.TRUE.value for flag in judgements.get("step_flags", [])]
    return float(hiprag_rewards.hiprag_reward_reference(text, golds, flags, **dict(params)))


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """veRL's ``batch`` reward manager's signature: one result dict per sample, the batch's judge calls together."""
    extras = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    judge = _make_judge(kwargs.pop("judge", None))
    settings = [_settings(extra, kwargs) for extra in extras]
    from scoring.formats import parse

    prepared = []
    for setting, text, truth, extra in zip(settings, solution_strs, ground_truths, extras, strict=True):
        question, titles = _question(extra)
        trajectory = parse(METHODS[setting["method"]].format, text)
        prepared.append((setting["method"], trajectory, question, golds_of(truth), titles))
    judged = _run(_judge_all(prepared, judge))
    results: list[dict[str, Any]] = []
    # Paper mode scores per method with score_batch (HiPRAG's batch-average bonus needs the batch).
    by_method: dict[tuple[str, str], list[int]] = {}
    for i, setting in enumerate(settings):
        by_method.setdefault(
            (setting["method"], json.dumps(setting.get("params") or {}, sort_keys=True)), []
        ).append(i)
    scored: dict[int, Scored | Exception] = {}
    for (method, params_json), indices in by_method.items():
        items = [
            BatchItem(solution_strs[i], prepared[i][3] or [""], judged[i]["judgements"]) for i in indices
        ]
        for i, outcome in zip(
            indices, score_batch(method, items, params=json.loads(params_json)), strict=True
        ):
            scored[i] = outcome
    for i, setting in enumerate(settings):
        result = scored[i]
        method, mode = setting["method"], setting["mode"]
        ok = result if isinstance(result, Scored) else None
        error = None if ok is not None else str(result)
        if mode == "reference":
            try:
                total = _reference_score(
                    method,
                    solution_strs[i],
                    prepared[i][3],
                    judged[i]["judgements"],
                    setting.get("reference_params") or {},
                )
            except Exception as exc:  # the released code's own failures are part of reference mode
                total, error = 0.0, f"{type(exc).__name__}: {exc}"
        else:
            total = ok.reward.total if ok is not None else 0.0
        results.append(
            {"score": float(total), "searchlab": _detail(method, mode, ok, judged[i]["verdicts"], error)}
        )
    return results


def compute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """veRL's per-sample reward function (``naive``/``dapo`` managers): :func:`compute_score_batch` of one."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]
