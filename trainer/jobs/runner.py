"""The experiment's stages in order, each skipped when it finished before (a rerun with the same ``--out`` resumes):

1. the BM25 index of the corpus; the start model (the given one, or the base model converted and warm-started);
2. the held-out questions (``questions/eval.jsonl``) and the training questions (``questions/train.jsonl``: the
   screened candidates; with ``--screen-only`` the run stops here, and a later run with the same ``--out`` trains
   on that list without screening again);
3. every arm trained with every seed (``train-<arm>-s<k>``), ``--concurrent`` at a time (fewer on a GPU whose free
   memory holds fewer), the start model evaluated meanwhile (``start-<method>``);
4. each trained model evaluated on the held-out questions (``eval-<arm>-s<k>``), greedy, in the training budgets;
5. ``result.json`` and ``result.md``.

The manifest's ``phases`` add up each phase's wall seconds; its status ends ``finished`` or ``failed`` with the reason.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from trainer.jobs.evaluation import EvaluationStage, run_stage
from trainer.jobs.plan import ExperimentPlan
from trainer.jobs.report import write_result
from trainer.jobs.spool import ExperimentSpool, write_rows
from trainer.jobs.stages import StageFailed, ensure_index, held_out_rows, start_model, training_questions
from trainer.jobs.timing import gpu_concurrency, write_timing
from trainer.jobs.training import TrainerJob, TrainerPool, arm_config, model_saved, training_jobs
from trainer.spool import SpoolFileError


def header(plan: ExperimentPlan) -> dict[str, Any]:
    """The experiment manifest's description of the run (the spool adds its id, host, times, status, phases)."""
    import hashlib

    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    split = None
    if plan.split is not None:
        split = {"file": str(plan.split), "sha256": hashlib.sha256(plan.split.read_bytes()).hexdigest()}
    arms = " vs ".join(
        f"{a.name} ({' '.join([a.method, *(f'{k}={v}' for k, v in a.params.items())])})" for a in plan.arms
    )
    return {
        "name": plan.name or f"{arms}, {plan.seeds} seed(s), up to {plan.steps} steps, on {device}",
        "arms": [a.to_json() for a in plan.arms],
        "baseline": plan.baseline,
        "seeds": plan.seed_values,
        "start_model": str(plan.start_model.resolve()) if plan.start_model else "",
        "judge": plan.judge.kind,
        "screen": {"samples": plan.screen_samples, "min": plan.screen_min, "max": plan.screen_max},
        "split": split,
        "steps": plan.steps,
        "torch": torch.__version__,
        "device": device,
    }


def run_experiment(plan: ExperimentPlan) -> int:
    """Run the plan into ``plan.out``; 0 when every stage finished, 1 when one failed, 2 for a bad setting."""
    from trainer.config import ConfigError

    plan.work.mkdir(parents=True, exist_ok=True)
    spool = ExperimentSpool(plan.out.resolve(), header(plan))
    spool.log(f"experiment {spool.manifest['id']}: {spool.manifest['name']}")
    try:
        failed = _run(plan, spool)
    except (StageFailed, ConfigError) as exc:  # a stage that cannot go on, or a setting named by its field
        spool.log(f"failed: {exc}")
        spool.finish("failed", str(exc))
        return 2 if isinstance(exc, ConfigError) else 1
    except BaseException as exc:
        spool.log(f"failed: {type(exc).__name__}: {exc}")
        spool.finish("failed", f"{type(exc).__name__}: {exc}")
        raise
    spool.finish("failed" if failed else "finished", "; ".join(failed))
    spool.log("done" if not failed else f"done, with failures: {'; '.join(failed)}")
    return 1 if failed else 0


def _run(plan: ExperimentPlan, spool: ExperimentSpool) -> list[str]:
    """The stages; the failures that did not stop the run (a trainer that exited non-zero)."""
    work = plan.work.resolve()
    index = plan.index.resolve() if plan.index else work / "index-bm25"
    ensure_index(plan.corpus.resolve(), index, spool)
    start = start_model(plan, index, spool)
    spool.update(start_model=str(start))
    eval_rows = held_out_rows(plan)
    eval_file = spool.root / "questions" / "eval.jsonl"
    if not eval_file.is_file():
        write_rows(eval_file, eval_rows)
    budgets = arm_config(
        plan, plan.baseline_arm, plan.seed, start, work / "none", index, work / "none"
    ).agent_budgets()
    train_file = training_questions(plan, start, index, budgets, spool)
    if plan.screen_only:
        spool.log(f"screen only: {train_file} written; stopping before training")
        return []
    every, todo = training_jobs(plan, spool, start, train_file, index)
    failed = train_and_evaluate_start(plan, spool, todo, start, index, budgets, eval_rows)
    started = time.perf_counter()
    for job in every:
        key = f"eval-{job.arm.name}-s{job.seed}"
        if not spool.stage_finished(key) and not model_saved(job.output_dir):
            spool.log(f"{key}: no model saved by {job.key}; its evaluation is skipped")
            continue
        stage = EvaluationStage(
            key=key,
            role="eval",
            method=job.arm.method,
            model=str(job.output_dir),
            params=dict(job.arm.params),
            seed=job.seed,
            arm=job.arm.name,
            pair_seed=job.seed,
            engine=plan.eval_engine,
            batch_size=plan.eval_batch_size,
        )
        run_stage(spool, stage, eval_rows, index, budgets, plan.judge)
        spool.add_phase("eval", time.perf_counter() - started)
        started = time.perf_counter()
        write_result(spool, plan, final=False)  # a run cut short still has the table of what it evaluated
    write_result(spool, plan)
    return failed


def train_and_evaluate_start(
    plan: ExperimentPlan,
    spool: ExperimentSpool,
    todo: list[TrainerJob],
    start: Path,
    index: Path,
    budgets: dict[str, Any],
    eval_rows: list[dict[str, Any]],
) -> list[str]:
    """The trainers (in a thread that supervises their subprocesses) while the start model is evaluated here;
    each trained stage's ``timing.csv``; the trainers that failed."""
    train_until = plan.deadline - plan.eval_reserve if plan.deadline else 0.0
    if plan.deadline:
        spool.log(
            f"training: {plan.steps} steps asked, {train_until - spool.log.elapsed():.0f} s left for them"
        )
    evaluating = not all(spool.stage_finished(f"start-{m}") for m in plan.methods)
    concurrent = 0
    if todo:
        requested = plan.concurrent or len(todo)
        concurrent = gpu_concurrency(
            requested, plan.gpu_memory_per_run, start, spool.log, evaluating=evaluating
        )
    pool = TrainerPool(spool, todo, concurrent, train_until, hard_margin=plan.eval_reserve / 2)
    errors: list[BaseException] = []

    def supervise() -> None:
        try:
            pool.run()
        except BaseException as exc:  # re-raised in the main thread once the start evaluations end
            errors.append(exc)

    started = time.perf_counter()
    thread = threading.Thread(target=supervise, name="trainers", daemon=True)
    thread.start()
    try:
        for method in plan.methods:
            begun = time.perf_counter()
            stage = EvaluationStage(
                f"start-{method}",
                "start_eval",
                method,
                str(start),
                {},
                seed=plan.seed,
                engine=plan.eval_engine,
                batch_size=plan.eval_batch_size,
            )
            run_stage(spool, stage, eval_rows, index, budgets, plan.judge)
            spool.add_phase("start_eval", time.perf_counter() - begun)
        thread.join()
    except BaseException:  # a failed start evaluation, Ctrl-C or SIGTERM: no trainer is left running
        pool.stop()
        raise
    spool.add_phase("training", time.perf_counter() - started)
    if errors:
        pool.stop()
        raise errors[0]
    for job in todo:
        try:
            spool.log(f"{job.key}: timing.csv, {write_timing(job.stage, job.output_dir)} steps")
        except SpoolFileError as exc:  # a batch the report client left unreadable: no timing, the run goes on
            spool.log(f"{job.key}: no timing.csv ({exc})")
    return [f"{job.key}: trainer exited {job.exit_code}" for job in todo if job.exit_code not in (0, None)]
