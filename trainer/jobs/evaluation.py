"""An evaluation stage: a model answers questions in a method's format, each record a line of ``records.jsonl``.

The screen's samples (``screen-<n>``, at the training temperature), the start model's evaluation (``start-<method>``)
and each trained model's (``eval-<arm>-s<k>``) are all this: :func:`agent.evaluate.evaluate_sync` with the
experiment's judge (:func:`agent.judge_spec.build_judges`) in the training budgets, greedy unless sampled.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trainer.jobs.spool import (
    ExperimentSpool,
    end_evaluation,
    evaluation_manifest,
    read_rows,
    write_json,
    write_rows,
)


@dataclass(frozen=True)
class EvaluationStage:
    key: str
    role: str  # screen | start_eval | eval
    method: str
    model: str
    params: dict[str, Any]
    temperature: float = 0.0
    seed: int = 0  # the rollouts' sampling seed
    arm: str = ""
    pair_seed: int | None = None  # the seed the model was trained with (the manifest's ``seed``)
    sample: int = 0
    engine: str = "transformers"  # or "vllm" (agent.backend_vllm)
    batch_size: int = 0  # questions per batch (0: all at once)


def questions_of(rows: list[dict[str, Any]]) -> list[Any]:
    from agent.rollout import Question

    return [
        Question(
            id=str(r["id"]),
            text=r["question"],
            golds=tuple(r["golden_answers"]),
            dataset=str((r.get("metadata") or {}).get("data_source", "")),
            supporting_titles=tuple((r.get("metadata") or {}).get("supporting_titles") or ()),
        )
        for r in rows
    ]


def run_stage(
    spool: ExperimentSpool,
    stage: EvaluationStage,
    rows: list[dict[str, Any]],
    index: Path,
    budgets: dict[str, Any],
    judge: Any,
) -> list[dict[str, Any]]:
    """The stage's records: read back when it finished before (a resumed run), else evaluated and written."""
    folder = spool.stage(stage.key)
    if spool.stage_finished(stage.key):
        return read_rows(folder / "records.jsonl")
    manifest = evaluation_manifest(
        role=stage.role,
        method=stage.method,
        model=stage.model,
        temperature=stage.temperature,
        questions=len(rows),
        arm=stage.arm,
        seed=stage.pair_seed,
        sample=stage.sample,
    )
    write_json(folder / "manifest.json", manifest)  # running: a replay names the stage and leaves it out
    started = time.perf_counter()
    try:
        records = evaluate_model(stage, rows, index, budgets, judge)
    except Exception as exc:  # the stage fails on the record; the run decides whether to go on
        end_evaluation(
            folder, manifest, seconds=time.perf_counter() - started, error=f"{type(exc).__name__}: {exc}"
        )
        raise
    write_rows(folder / "records.jsonl", records)
    end_evaluation(folder, manifest, seconds=time.perf_counter() - started)
    spool.log(
        f"{stage.key}: {len(records)} questions in {time.perf_counter() - started:.0f} s, {summary(records)}"
    )
    return records


def evaluate_model(
    stage: EvaluationStage, rows: list[dict[str, Any]], index: Path, budgets: dict[str, Any], judge: Any
) -> list[dict[str, Any]]:
    """One record per question, as the web app's evaluation stores them (webapp.trajectories' import fields)."""
    from agent.backend_transformers import TransformersBackend
    from agent.evaluate import evaluate_sync
    from agent.judge_spec import build_judges
    from agent.rollout import PAPER_CONFIGS
    from agent.rollout_methods import METHODS
    from retrieval.api import searcher_for_index

    if stage.engine == "vllm":
        from agent.backend_vllm import VLLMBackend

        backend: Any = VLLMBackend.for_device(stage.model)
    else:
        backend = TransformersBackend.from_pretrained(stage.model, threads=4, max_batch_size=256)
    config = replace(PAPER_CONFIGS[stage.method], **budgets, temperature=stage.temperature, seed=stage.seed)
    try:
        result = evaluate_sync(
            backend,
            searcher_for_index(index),
            stage.method,
            questions_of(rows),
            judges=build_judges(judge, backend),
            config=config,
            params=stage.params,
            batch_size=stage.batch_size or len(rows),
        )
    finally:  # a vLLM engine's worker process would outlive the stage and hold the next engine's memory
        close = getattr(backend, "close", None)
        if callable(close):
            close()
    format_name = METHODS[stage.method].format
    return [record_row(record, format_name) for record in result.records]


def record_row(record: Any, format_name: str) -> dict[str, Any]:
    """One evaluated question (an ``agent.evaluate.TrajectoryRecord``) as a line of ``records.jsonl``."""
    from agent import judges as det

    t = record.trajectory
    return {
        "id": record.question.id,
        "question": record.question.text,
        "golden_answers": list(record.question.golds),
        "answer": t.answer,
        "cem": record.cem,
        "em": record.em,
        "f1": record.f1,
        "format_ok": t.valid,
        "n_searches": t.n_searches,
        "over_search": [_flag(v) for v in record.flags(det.OVER_SEARCH)],
        "under_search": [_flag(v) for v in record.flags(det.UNDER_SEARCH)],
        "reward": None if record.reward is None else record.reward.total,
        "text": record.rollout.text,
        "format": format_name,
        "verdicts": [
            {
                "detector": detector,
                "outcome": _outcome(result.verdict),
                "step": result.step_index,
                "judge_model": result.model,
                "raw_reply": result.reply or result.error or "",
            }
            for detector in (det.OVER_SEARCH, det.UNDER_SEARCH)
            for result in record.verdicts.get(detector, [])
            if result.step_index is not None
        ],
    }


def _outcome(verdict: Any) -> str:
    """A verdict as the trajectories app stores it: an unparseable reply or a failed call is an error, never a no."""
    flag = _flag(verdict)
    return "error" if flag is None else "true" if flag else "false"


def _flag(verdict: Any) -> bool | None:
    from scoring.verdicts import Verdict

    return True if verdict is Verdict.TRUE else False if verdict is Verdict.FALSE else None


def summary(records: list[dict[str, Any]]) -> str:
    n = max(1, len(records))
    return (
        f"CEM {sum(r['cem'] for r in records) / n:.3f}, "
        f"searches {sum(r['n_searches'] for r in records) / n:.2f}, "
        f"format ok {sum(r['format_ok'] for r in records) / n:.3f}"
    )
