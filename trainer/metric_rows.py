"""The rows of ``metrics.jsonl`` and ``samples.jsonl``, and how they are appended (:mod:`trainer.callbacks` writes them
during a run; the web app's supervisor tails them).

``<output_dir>/metrics.jsonl``: one row per metric per logged step, ``{"step", "time", "key", "value"}`` (``time`` is
Unix seconds). Keys (stable; the web app plots them):

======================================  ==============================================================================
``reward/mean``, ``reward/std``         the method's total reward over the completions scored since the last log
``reward/<component>/mean``, ``/std``   each term of the method's reward (scoring's ``Reward.components``)
``reward/unscorable``                   completions left unscored for a missing/failed judge outcome
``osr``, ``usr``                        HiPRAG Eq. 2 over judged steps (only when step verdicts exist)
``osr_redundant``                       OSR without the evidence judge's retrieval misses (when it names rules)
``searches/mean``                       search steps per trajectory (HiPRAG Eq. 3)
``format_ok_rate``                      trajectories that parse in the method's format
``accuracy``, ``em``, ``f1``            cover exact match (HiPRAG's CEM), exact match, token F1 of the final answer
``over_searching_ratio``                AutoSearch §5.1 (only when intermediate answers exist)
``search_efficiency``                   AutoSearch SE = EM / search depth (when the depth is not zero)
``judge_errors``                        judged steps whose verdict was missing, unparseable or failed
``judge/calls``, ``judge/errors``       LLM judge calls sent since the last log (cache hits left out), and those
                                        that failed after their last retry (agent rollout with an LLM judge only)
``judge/tokens_in``, ``/tokens_out``    the judge's prompt and completion tokens since the last log
``judge/seconds``                       the judge calls' summed latency since the last log (calls overlap)
``completion_length``                   policy tokens per completion (retrieved tokens excluded)
``kl``, ``entropy``, ``clip_ratio``     TRL's, over policy tokens (``kl`` only with ``beta`` > 0)
``step_time``                           seconds per optimizer step (generation included)
``loss``, ``grad_norm``, ``learning_rate``
``groups/spread_rate``                  share of GRPO groups with reward spread (trainer.rewards.group_metrics)
``groups/process_reordered_rate``       share of groups whose order the process term changed (same)
``groups/spread_rate_before``           dynamic sampling: the spread share before flat groups were replaced
``groups/dynamic_draws``                dynamic sampling: replacement groups rolled out this step
``groups/redraw_rounds``                dynamic sampling: replacement rounds after the batch (each a rollout call)
``groups/spare_groups_used``            dynamic sampling: spare groups (rolled out with the batch) put in flat ones' places
``groups/spare_groups_dropped``         dynamic sampling: spare groups rolled out and not needed this step
``ppo/value_loss`` … ``tiresrag/…``     algorithm- and method-specific terms
``val/cem``, ``val/em``, ``val/acc``    held-out questions (``validation.every_steps``), greedy at the run's budgets:
                                        cover EM (HiPRAG's CEM), EM, FlashRAG's ``acc``
``val/average_searches``, ``val/osr``   held-out searches per trajectory (HiPRAG Eq. 3) and over-search rate (Eq. 2,
``val/usr``, ``val/format_ok_rate``     when steps were judged), under-search rate, format-correct rate
======================================  ==============================================================================

``<output_dir>/samples.jsonl``: at step 1 and every ``sample_every`` steps, a few trajectories of the latest batch with their steps,
verdicts and rewards (one JSON object per line, fields in :func:`sample_row`).

After a resume, rows of steps beyond the checkpoint are removed first, so a (step, key) pair appears once.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from scoring.aggregates import EvaluationReport, TrajectoryOutcome, evaluation_report
from trainer.rewards import SampleScore

METRICS_FILE = "metrics.jsonl"
SAMPLES_FILE = "samples.jsonl"

# TRL's log keys → ours. TRL's own reward keys are left out: the ledger has the method's reward and its parts.
TRL_KEYS = {
    "loss": "loss",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "kl": "kl",
    "entropy": "entropy",
    "clip_ratio/region_mean": "clip_ratio",
    "completions/mean_length": "completion_length",
    "step_time": "step_time",
}
PASSED_PREFIXES = ("ppo/", "tiresrag/", "token_rewards/", "groups/")


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.pstdev(values) if len(values) > 1 else 0.0


def score_metrics(scores: list[SampleScore]) -> dict[str, float]:
    """The reward and behaviour metrics of a set of scored completions (see the module docstring)."""
    metrics: dict[str, float] = {}
    if not scores:
        return metrics
    scored = [s.reward for s in scores if s.reward is not None]
    metrics["reward/unscorable"] = float(len(scores) - len(scored))
    if scored:
        metrics["reward/mean"], metrics["reward/std"] = _mean_std([r.total for r in scored])
        for name in sorted({name for r in scored for name in r.components}):
            values = [r.components[name] for r in scored if name in r.components]
            metrics[f"reward/{name}/mean"], metrics[f"reward/{name}/std"] = _mean_std(values)
    row = evaluation_report(
        TrajectoryOutcome(
            dataset="train",
            cem=s.cem,
            em=s.em,
            f1=s.f1,
            format_ok=s.trajectory.valid,
            n_searches=s.trajectory.n_searches,
            over_search=s.over_search,
            under_search=s.under_search,
            intermediate_correct=s.intermediate_correct,
            over_search_rules=s.over_search_rules,
        )
        for s in scores
    ).overall_micro
    for key, value in (
        ("osr", row.osr),
        ("osr_redundant", row.osr_redundant if any(s.over_search_rules for s in scores) else None),
        ("usr", row.usr),
        ("searches/mean", row.average_searches),
        ("format_ok_rate", row.format_ok_rate),
        ("accuracy", row.cem),
        ("em", row.em),
        ("f1", row.f1),
        ("over_searching_ratio", row.over_searching_ratio),
        ("search_efficiency", row.search_efficiency),
    ):
        if value is not None:
            metrics[key] = float(value)
    if row.n_judge_errors or row.n_search_steps or row.n_non_search_steps:
        # Steps whose verdict was missing, unparseable or failed: plotted per step (0 too once steps are judged).
        metrics["judge_errors"] = float(row.n_judge_errors)
    return metrics


VALIDATION_PREFIX = "val/"
# searchlab's metrics as the trackers receive them beside TRL's own keys: the prefix keeps ``reward/mean`` apart from
# TRL's ``reward`` (MLflow's file store keeps a metric as a file, so ``reward`` and ``reward/…`` cannot both exist).
PUBLISHED_PREFIX = "searchlab/"


def validation_metrics(report: EvaluationReport) -> dict[str, float]:
    """``val/*`` metrics of an evaluation of the held-out questions (micro over its trajectories): CEM (HiPRAG's
    cover EM), EM, FlashRAG's ``acc`` when measured, HiPRAG Eq. 3's average searches, Eq. 2's OSR and USR when steps
    were judged, the format-correct rate."""
    row = report.overall_micro
    values = {
        "cem": row.cem,
        "em": row.em,
        "acc": row.acc,  # FlashRAG's acc (None when no trajectory's was measured)
        "average_searches": row.average_searches,
        "osr": row.osr,
        "usr": row.usr,
        "format_ok_rate": row.format_ok_rate,
    }
    return {
        f"{VALIDATION_PREFIX}{key}": float(value)
        for key, value in values.items()
        if isinstance(value, int | float) and math.isfinite(value)
    }


def path_clashes(keys: Iterable[str]) -> list[str]:
    """The keys under another key's path (``reward/unscorable`` beside ``reward``): MLflow's file store keeps each
    metric as a file, so a key cannot also be a folder. TRL logs both of those; the one under the path is left to
    searchlab's copy (``searchlab/reward/unscorable``)."""
    names = set(keys)
    return sorted(
        key
        for key in names
        if any("/".join(key.split("/")[:i]) in names for i in range(1, key.count("/") + 1))
    )


def trl_metrics(logs: Mapping[str, Any]) -> dict[str, float]:
    """The TRL log entries we keep, renamed."""
    metrics: dict[str, float] = {}
    for key, value in logs.items():
        name = TRL_KEYS.get(key) or (key if key.startswith(PASSED_PREFIXES) else None)
        if name is not None and isinstance(value, int | float) and math.isfinite(value):
            metrics[name] = float(value)
    return metrics


def sample_row(step: int, score: SampleScore) -> dict[str, Any]:
    """One trajectory as the web app stores it (Trajectory, Step and JudgeVerdict rows)."""
    reward = score.reward
    flags = score.judgements.get("step_flags")
    rules = score.judgements.get("step_rules")
    step_rewards = reward.step_rewards if reward is not None else ()
    steps = []
    for i, step_ in enumerate(score.trajectory.steps):
        verdicts = []
        if isinstance(flags, list) and i < len(flags):
            detector = "over_search" if step_.is_search else "under_search"
            verdict = {"detector": detector, "outcome": _json_outcome(flags[i])}
            if isinstance(rules, list) and i < len(rules) and rules[i]:
                verdict["rule"] = str(rules[i])  # the evidence judge's rule (scoring.judging.evidence)
            verdicts.append(verdict)
        steps.append(
            {
                "index": step_.index,
                "kind": step_.kind.value,
                "reasoning": step_.reasoning,
                "query": step_.query,
                "context": step_.context,
                "conclusion": step_.conclusion,
                "reward": step_rewards[i] if i < len(step_rewards) else None,
                "verdicts": verdicts,
            }
        )
    return {
        "step": step,
        "time": time.time(),
        "prompt": score.prompt,
        "question": score.row.get("question"),
        "question_id": score.row.get("id"),
        "dataset": score.dataset,
        "golden_answers": list(score.golds),
        "text": score.text,
        "format_ok": score.trajectory.valid,
        "format_error": str(score.trajectory.error) if score.trajectory.error else None,
        "answer": score.trajectory.answer,
        "cem": score.cem,
        "em": score.em,
        "f1": score.f1,
        "n_steps": len(score.trajectory.steps),
        "n_searches": score.trajectory.n_searches,
        "reward": reward.total if reward is not None else None,
        "components": dict(reward.components) if reward is not None else {},
        "step_rewards": list(step_rewards),
        "unscorable_reason": score.error,
        "judgements": _jsonable(score.judgements),
        "end": str(
            score.extras.get("end") or ""
        ),  # why the rollout ended (agent.rollout.BUDGET_ENDS, answer, eos)
        "cut_turns": int(score.extras.get("cut_turns") or 0),
        "steps": steps,
    }


def _json_outcome(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).lower()


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def append_rows(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())  # the supervisor tails the file from another process


def truncate_after(path: Path, step: int) -> None:
    """Drop the rows of steps after ``step`` (a resumed run rewrites them)."""
    if not path.is_file():
        return
    kept = [
        line for line in path.read_text(encoding="utf-8").splitlines() if json.loads(line)["step"] <= step
    ]
    path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
