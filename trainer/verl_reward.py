"""searchlab's rewards as a veRL reward function: ``compute_score(data_source, solution_str, ground_truth, extra_info)``.

veRL (0.9.1) calls a custom reward function per sample from its ``naive`` reward manager and its Reward Loop (the
trainer's default path; HiPRAG's batch average there: :mod:`trainer.verl_reward_loop`) and per batch from its
legacy ``batch`` manager; both are here::

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

Reference mode runs the released code on prompt+response, as it ran: veRL hands the response alone, so the released
prompt is put back in front where its answer-extraction rule counts the prompt's example answers
(:func:`_with_released_prompt`). HiPRAG's Sec. 5.3 ablations need the batch's average bonus (``batch_bonus``:
:data:`BATCH_BONUS_MODES`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scoring.scorer import METHODS, BatchItem, Scored, score_batch
from scoring.verdicts import Verdict
from trainer.verl_judging import judge_all, make_judge, run_async

MODES = ("paper", "reference")


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


def _plain(value: Any) -> Any:
    """Nested settings as plain dicts and lists (veRL passes ``reward_kwargs`` as OmegaConf containers)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ListConfig":
        return [_plain(v) for v in value]
    return value


def _settings(extra_info: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    own = extra_info.get("searchlab") if isinstance(extra_info, Mapping) else None
    merged = _plain({**kwargs, **(own if isinstance(own, Mapping) else {})})
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


def _with_released_prompt(text: str, marker: str, prompt: str) -> str:
    """Search-R1's ``extract_solution`` (and HiPRAG's copy) reads prompt+response: it takes the last ``<answer>`` span
    only when there are at least two, counting the prompt's example answers. veRL hands ``compute_score`` the
    response alone (as its own ``search_r1_like_qa_em`` expects), so the released prompt goes back in front unless
    the text already holds it (its ``marker``): a bare ``<answer> Paris </answer>`` then scores as the released code
    scores it on prompt+response (1.0), and a response without an answer gets the prompt's example ("Beijing"), as
    there."""
    return text if marker in text else prompt + text


def _reference_search_r1(
    text: str, golds: Sequence[str], judgements: Mapping[str, Any], params: Mapping[str, Any], question: str
) -> float:
    """Search-R1's ``compute_score_em`` on its ``make_prefix`` prompt (two ``<answer>`` spans: ``<answer> and
    </answer>``, ``<answer> Beijing </answer>``) and the response."""
    from scoring.formats.searchr1 import SEARCHR1_INSTRUCTION, make_prefix
    from scoring.rewards import searchr1

    prompted = _with_released_prompt(text, SEARCHR1_INSTRUCTION, make_prefix(question))
    return float(searchr1.searchr1_em_reward_reference(prompted, golds, **dict(params)))


def _reference_hiprag(
    text: str, golds: Sequence[str], judgements: Mapping[str, Any], params: Mapping[str, Any], question: str
) -> float:
    """HiPRAG's ``compute_score_em`` with the step flags; its validation path (``structure_format_score`` 0: CEM of
    ``extract_solution``, ≥ 2 spans) on ``AGENT_PROMPT_V2_SHORT`` in Qwen's chat layout (one span) and the
    response."""
    from scoring.judging.hiprag import AGENT_PROMPT_V2_SHORT, qwen_chat
    from scoring.rewards import hiprag as hiprag_rewards

    flags = [flag == Verdict.TRUE.value for flag in judgements.get("step_flags", [])]
    if float(params.get("structure_format_score", 0.2)) == 0:
        prompt = qwen_chat(f"{AGENT_PROMPT_V2_SHORT}\nUser Question: {question}")
        text = _with_released_prompt(text, AGENT_PROMPT_V2_SHORT, prompt)
    return float(hiprag_rewards.hiprag_reward_reference(text, golds, flags, **dict(params)))


# The released reward code (reference mode), for the methods whose code was released with a veRL reward.
REFERENCE_SCORERS: dict[
    str, Callable[[str, Sequence[str], Mapping[str, Any], Mapping[str, Any], str], float]
] = {
    "search_r1": _reference_search_r1,
    "hiprag": _reference_hiprag,
}
REFERENCE_METHODS = tuple(REFERENCE_SCORERS)


# HiPRAG Sec. 5.3's ablations give a trajectory without a step of the evaluated type "the average bonus within the
# current training batch". How each veRL path gets it:
BATCH_BONUS_MODES = (
    "batch",  # compute_score_batch (veRL's legacy ``batch`` manager): the batch is here, score_batch fills it
    "refuse",  # compute_score per sample (``naive``, the Reward Loop's default): no batch, so a clear error
    "deferred",  # trainer.verl_reward_loop's manager pair: scored without it, filled where veRL holds the batch
)
ABLATIONS = ("over_only", "under_only")


class BatchBonusUnavailable(ValueError):
    """HiPRAG's Sec. 5.3 ablation asked of a per-sample reward function, which never sees the batch."""


# The methods whose settings can owe a trajectory the batch's average bonus, and when they do.
BATCH_AVERAGE: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "hiprag": lambda params: params.get("process") in ABLATIONS,
}


def _needs_batch(method: str, params: Mapping[str, Any]) -> bool:
    needs = BATCH_AVERAGE.get(method)
    return needs is not None and needs(params)


def _score_alone(
    method: str, item: BatchItem, params: Mapping[str, Any]
) -> tuple[Scored | Exception, dict[str, Any] | None]:
    """One sample scored without its batch (``deferred``): a trajectory that needs the batch's average bonus is
    scored with none and marked ``pending``; one that earned a bonus of its own reports it (``earned``), so the
    average can be taken later over the batch (:func:`apply_batch_average`)."""
    from scoring.errors import BatchAverageRequired, ScoringInputError
    from scoring.scorer import score
    from scoring.verdicts import MissingVerdict

    group = json.dumps(params, sort_keys=True)
    try:
        scored = score(method, item.text, item.golds, params=params, judgements=item.judgements)
    except BatchAverageRequired:
        base = score(
            method,
            item.text,
            item.golds,
            params={**params, "batch_average_bonus": 0.0},
            judgements=item.judgements,
        )
        return base, {"group": group, "pending": True}
    except (ScoringInputError, MissingVerdict) as exc:
        return exc, None
    components = scored.reward.components
    if components.get("n_counted", 0.0) > 0:
        return scored, {"group": group, "earned": components["process_bonus"]}
    return scored, None


def apply_batch_average(scores: Sequence[float], details: Sequence[Any]) -> tuple[list[float], list[Any]]:
    """HiPRAG Sec. 5.3 over a batch scored sample by sample (``batch_bonus="deferred"``): each ``pending`` sample
    gets the batch's average bonus added to its score, the mean λp·N_corr/N over the samples of the same settings
    that earned a bonus of their own (0 when none did) — :func:`scoring.rewards.hiprag.average_earned_bonus`, as
    :func:`scoring.scorer.score_batch` computes it. ``details`` are the results' ``searchlab`` JSON strings (others
    pass through); returns the new scores and details, in order."""
    parsed = [_loads(detail) for detail in details]
    earned: dict[str, list[float]] = {}
    for detail in parsed:
        entry = detail.get("batch_bonus") if detail else None
        if isinstance(entry, Mapping) and "earned" in entry:
            earned.setdefault(str(entry["group"]), []).append(float(entry["earned"]))
    new_scores, new_details = [float(x) for x in scores], list(details)
    for i, detail in enumerate(parsed):
        entry = detail.get("batch_bonus") if detail else None
        if not (isinstance(entry, dict) and entry.get("pending")):
            continue
        bonuses = earned.get(str(entry["group"]), [])
        average = sum(bonuses) / len(bonuses) if bonuses else 0.0
        new_scores[i] += average
        entry.update(pending=False, average=average, n_earned=len(bonuses))
        assert detail is not None
        detail["components"]["process_bonus"] = average
        new_details[i] = json.dumps(detail)
    return new_scores, new_details


def _loads(detail: Any) -> dict[str, Any] | None:
    if not isinstance(detail, str):
        return None
    try:
        value = json.loads(detail)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _refuse_batch_average(settings: Sequence[Mapping[str, Any]]) -> None:
    """A per-sample reward asked for HiPRAG's batch average (``batch_bonus="refuse"``): a clear error."""
    for setting in settings:
        params = setting.get("params") or {}
        if setting["mode"] == "paper" and _needs_batch(setting["method"], params):
            raise BatchBonusUnavailable(
                f"HiPRAG process={params['process']!r} (Sec. 5.3) gives a trajectory without a step of the "
                "evaluated type the average bonus of the training batch, and a per-sample compute_score never sees "
                "the batch (veRL's naive manager and its Reward Loop score each sample alone). Use "
                "trainer.verl_reward_loop's SearchlabRewardManager with SearchlabAgentLoopManager (the Reward "
                "Loop), or compute_score_batch with reward_manager=batch (docs/scale.md)"
            )


def _score_paper(
    settings: Sequence[Mapping[str, Any]],
    solution_strs: Sequence[str],
    prepared: Sequence[tuple[str, Any, str, list[str], list[str]]],
    judged: Sequence[Mapping[str, Any]],
    batch_bonus: str,
) -> tuple[dict[int, Scored | Exception], dict[int, dict[str, Any]]]:
    """Paper mode: each sample's score (or why not) and, ``deferred``, its batch-bonus entry. Samples of the same
    method and params are scored together with score_batch (HiPRAG's batch-average bonus needs the batch)."""
    by_method: dict[tuple[str, str], list[int]] = {}
    for i, setting in enumerate(settings):
        by_method.setdefault(
            (setting["method"], json.dumps(setting.get("params") or {}, sort_keys=True)), []
        ).append(i)
    scored: dict[int, Scored | Exception] = {}
    bonus_entries: dict[int, dict[str, Any]] = {}
    for (method, params_json), indices in by_method.items():
        params = json.loads(params_json)
        items = [
            BatchItem(solution_strs[i], prepared[i][3] or [""], judged[i]["judgements"]) for i in indices
        ]
        if batch_bonus == "deferred" and _needs_batch(method, params):
            for i, item in zip(indices, items, strict=True):
                scored[i], entry = _score_alone(method, item, params)
                if entry is not None:
                    bonus_entries[i] = entry
            continue
        for i, outcome in zip(indices, score_batch(method, items, params=params), strict=True):
            scored[i] = outcome
    return scored, bonus_entries


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """veRL's ``batch`` reward manager's signature: one result dict per sample, the batch's judge calls together."""
    batch_bonus = str(kwargs.pop("batch_bonus", "batch"))
    if batch_bonus not in BATCH_BONUS_MODES:
        raise ValueError(f"batch_bonus must be one of {', '.join(BATCH_BONUS_MODES)}, got {batch_bonus!r}")
    extras = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    judge = make_judge(kwargs.pop("judge", None))
    settings = [_settings(extra, kwargs) for extra in extras]
    if batch_bonus == "refuse":
        _refuse_batch_average(settings)
    from scoring.formats import parse

    prepared = []
    for setting, text, truth, extra in zip(settings, solution_strs, ground_truths, extras, strict=True):
        question, titles = _question(extra)
        trajectory = parse(METHODS[setting["method"]].format, text)
        prepared.append((setting["method"], trajectory, question, golds_of(truth), titles))
    judged = run_async(judge_all(prepared, judge))
    scored, bonus_entries = _score_paper(settings, solution_strs, prepared, judged, batch_bonus)
    results: list[dict[str, Any]] = []
    for i, setting in enumerate(settings):
        result = scored[i]
        method, mode = setting["method"], setting["mode"]
        ok = result if isinstance(result, Scored) else None
        error = None if ok is not None else str(result)
        if mode == "reference":
            try:
                total = REFERENCE_SCORERS[method](
                    solution_strs[i],
                    prepared[i][3],
                    judged[i]["judgements"],
                    setting.get("reference_params") or {},
                    prepared[i][2],
                )
            except Exception as exc:  # the released code's own failures are part of reference mode
                total, error = 0.0, f"{type(exc).__name__}: {exc}"
        else:
            total = ok.reward.total if ok is not None else 0.0
        detail = _detail(method, mode, ok, judged[i]["verdicts"], error)
        if mode == "paper" and i in bonus_entries:
            detail = json.dumps({**json.loads(detail), "batch_bonus": bonus_entries[i]})
        results.append({"score": float(total), "searchlab": detail})
    return results


def compute_score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> dict[str, Any]:
    """veRL's per-sample reward function (``naive``/``dapo`` managers, the Reward Loop): :func:`compute_score_batch`
    of one. HiPRAG's Sec. 5.3 ablations need the batch and are refused here (:class:`BatchBonusUnavailable`) unless
    trainer.verl_reward_loop's manager asks for ``batch_bonus="deferred"``."""
    kwargs.setdefault("batch_bonus", "refuse")
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]
