"""The stages before training: the index, the base model, the warm start, the training candidates and the screen.

Each is skipped when its output exists (a rerun with the same ``--work`` and ``--out`` resumes). The screen samples
the start model ``n`` times on the training candidates at the training temperature (a seed per sample) and keeps
the questions it answered (cover EM, HiPRAG's accuracy) in ``min``..``max`` of them, plus ``--screen-unscreened-share``
of the kept set drawn from the rest (:mod:`trainer.jobs.screen_rule`, the web app's rule too): GRPO's process term
reaches the gradient only through a group whose rewards differ. A long screen runs in parts (``--screen-part K/N``,
each on its own machine or day, its pass counts in ``screen_part.json``) that a later run combines into the training
list (``--screen-parts``) without screening again.
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

from trainer.jobs.evaluation import EvaluationStage, run_stage
from trainer.jobs.plan import REPO, ExperimentPlan, split_rows
from trainer.jobs.plan_checks import PlanError, combine_parts, part_bounds, pool_sha256, read_screen_parts
from trainer.jobs.screen_rule import screened_rows
from trainer.jobs.spool import ExperimentSpool, read_json, read_rows, write_json, write_rows


class StageFailed(Exception):
    """A stage that cannot go on: the run stops, its reason in the log and the manifest's ``error``."""

    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(f"{stage}: {reason}")


def question_rows(path: Path) -> list[dict[str, Any]]:
    from trainer.train import read_question_rows

    return read_question_rows(path)


def ensure_index(corpus: Path, folder: Path, spool: ExperimentSpool) -> None:
    """The BM25 index of ``corpus``; its metadata (with the corpus checksum) copied into the spool."""
    from retrieval.index import METADATA_FILE, IndexConfig, build_index

    if not (folder / METADATA_FILE).is_file():
        started = time.perf_counter()
        build_index(corpus, folder, IndexConfig(kind="bm25"))
        spool.log(f"index: BM25 over {corpus} in {time.perf_counter() - started:.0f} s")
    shutil.copy(folder / METADATA_FILE, spool.root / "index_metadata.json")


# --smoke's warm start: the recipe's share of redundant searches and its plain SFT path (the one a GPU takes), on
# the tiny model's byte-level tokenizer (long turns) and 2 demonstrations: the check that the warm start runs on the
# machine at all.
SMOKE_WARM_START: dict[str, Any] = {
    "max_turn_tokens": 1000,
    "max_rollout_tokens": 6400,  # room for the redundant search at 1000-token turns
    "data": {"questions_per_method": 2},
    "training": {"epochs": 1, "batch_size": 2, "gradient_accumulation_steps": 1, "max_length": 8192},
}


def start_model(plan: ExperimentPlan, index: Path, spool: ExperimentSpool) -> Path:
    """The model every arm starts from: the given folder, or the warm start of the base model (the GGUF file
    converted, or with ``--smoke`` a tiny random model), made here."""
    if plan.start_model:
        return plan.start_model.resolve()
    work = plan.work.resolve()
    started = time.perf_counter()
    if plan.smoke:
        base, start = work / "base-tiny", work / "start-tiny"
        if not (base / "config.json").is_file():
            from trainer.models import tiny_model, tiny_tokenizer

            tokenizer = tiny_tokenizer()
            tiny_model(tokenizer, seed=plan.seed).save_pretrained(base)
            tokenizer.save_pretrained(base)
    else:
        assert plan.gguf is not None
        base = work / plan.gguf.stem.split(".")[0]
        start = work / f"{base.name}-warm"
        if not (base / "config.json").is_file():
            from agent.setup_model import convert

            convert(plan.gguf.resolve(), base)
            spool.log(f"base model: {plan.gguf.name} → {base} in {time.perf_counter() - started:.0f} s")
    spool.add_phase("base_model", time.perf_counter() - started)
    started = time.perf_counter()
    ensure_warm_start(plan, base, index, start, spool)
    spool.add_phase("warm_start", time.perf_counter() - started)
    return start


def ensure_warm_start(
    plan: ExperimentPlan, base: Path, index: Path, folder: Path, spool: ExperimentSpool
) -> None:
    """``trainer.warm_start`` on ``plan.warm_start_recipe`` (the cached trainer on a CPU, TRL's SFT on a GPU), its log
    kept in the spool's ``warm_start/``."""
    if (folder / "config.json").is_file():
        return
    recipe = tomllib.loads(plan.warm_start_recipe.read_text(encoding="utf-8"))
    recipe.update(output_dir=str(folder), index=str(index))
    recipe["model"] = {**recipe.get("model", {}), "path": str(base), "torch_threads": 4}
    recipe["data"] = {**recipe.get("data", {}), "path": str(plan.questions.resolve())}
    # The frozen layers' cache (trainer.warm_start_cached) on a CPU, where it cuts the warm start to about a third with
    # the same weights to 1e-5 (docs/warm_start.md); TRL's plain SFT on a GPU, and in --smoke, which checks that path.
    cached = not plan.smoke and not _cuda()
    recipe["training"] = {**recipe.get("training", {}), "cache_frozen_layers": cached}
    if plan.smoke:
        recipe["max_turn_tokens"] = SMOKE_WARM_START["max_turn_tokens"]
        recipe["max_rollout_tokens"] = SMOKE_WARM_START["max_rollout_tokens"]
        recipe["data"].update(SMOKE_WARM_START["data"])
        recipe["training"].update(SMOKE_WARM_START["training"])
    kept = spool.root / "warm_start"
    config = kept / "config.json"
    write_json(config, recipe)
    started = time.perf_counter()
    spool.log(f"warm start: {plan.warm_start_recipe.name} → {folder} (output in warm_start/log.txt)")
    with (kept / "log.txt").open("wb") as output:
        code = subprocess.run(
            [sys.executable, "-m", "trainer.warm_start", str(config)],
            cwd=REPO,
            stdout=output,
            stderr=subprocess.STDOUT,
        ).returncode
    for name in ("metrics.jsonl", "progress.json"):
        if (folder / name).is_file():
            shutil.copy(folder / name, kept / name)
    if code != 0:
        tail = (kept / "log.txt").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        raise StageFailed("warm start", f"exit {code}; warm_start/log.txt ends:\n" + "\n".join(tail))
    spool.log(f"warm start: done in {time.perf_counter() - started:.0f} s")


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def held_out_rows(plan: ExperimentPlan) -> list[dict[str, Any]]:
    """The evaluation's questions: the split's held-out ones in its order, else the ``test`` split's; the first
    ``eval_limit``."""
    rows = question_rows(plan.questions)
    if plan.split is None:
        return split_rows(rows, "test")[: plan.eval_limit]
    by_id = {str(r["id"]): r for r in rows}
    return [by_id[qid] for qid in plan.split_held_out][: plan.eval_limit]


def candidate_rows(plan: ExperimentPlan, warm: Path) -> list[dict[str, Any]]:
    """Training questions (the split's pool, else the ``train`` split) outside the warm start's demonstrations
    and, unless ``keep_guessable``, not answerable without evidence (``scoring.guessable``), shuffled with the
    seed, the first ``train_limit``."""
    from scoring.guessable import guessable

    seen: set[str] = set()
    demos = warm / "demonstrations.jsonl"
    if demos.is_file():
        seen = {
            str(json.loads(line)["question_id"]) for line in demos.read_text(encoding="utf-8").splitlines()
        }
    rows = question_rows(plan.questions)
    if plan.split is None:
        candidates = split_rows(rows, "train")
    else:
        wanted = set(plan.split_train)
        candidates = [r for r in rows if str(r["id"]) in wanted]
    kept = [
        r
        for r in candidates
        if str(r["id"]) not in seen
        and (plan.keep_guessable or not guessable(r["question"], r["golden_answers"]))
    ]
    random.Random(plan.seed).shuffle(kept)
    return kept[: plan.train_limit]


def training_questions(
    plan: ExperimentPlan, start: Path, index: Path, budgets: dict[str, Any], spool: ExperimentSpool
) -> Path:
    """``questions/train.jsonl``: the screened candidates (or all of them without a screen); an existing file is
    kept (the screen ran before, on this machine or a CPU beforehand). With ``--screen-part`` the part's kept rows
    (:func:`screen_part`); with ``--screen-parts`` the parts' pass counts combined (:func:`combined_parts`)."""
    if plan.screen_part:
        return screen_part(plan, start, index, budgets, spool)
    train_file = spool.root / "questions" / "train.jsonl"
    if train_file.is_file():
        spool.log(
            f"screen: {train_file} exists ({len(read_rows(train_file))} questions); not screening again"
        )
        return train_file
    if plan.screen_parts:
        return combined_parts(plan, start, spool)
    chosen = (
        spool.root / "questions" / "candidates.jsonl"
    )  # a screen cut short resumes on the same candidates
    candidates = read_rows(chosen) if chosen.is_file() else candidate_rows(plan, start)
    if not candidates:
        raise StageFailed(
            "screen", f"every training question of {plan.questions} is in the warm start's demonstrations"
        )
    if plan.screen_samples == 0:
        write_rows(train_file, candidates)
        return train_file
    write_rows(chosen, candidates)
    started = time.perf_counter()
    kept = screen(plan, start, index, budgets, candidates, spool)
    spool.add_phase("screen", time.perf_counter() - started)
    if not kept:
        raise StageFailed("screen", "no question kept")
    write_rows(train_file, kept)
    return train_file


def screen(
    plan: ExperimentPlan,
    start: Path,
    index: Path,
    budgets: dict[str, Any],
    candidates: list[dict[str, Any]],
    spool: ExperimentSpool,
) -> list[dict[str, Any]]:
    """The candidates the start model answered in ``screen_min``..``screen_max`` of ``screen_samples`` samples,
    each with ``metadata.screen``; ``screen_yield.json`` counts them by passes."""
    counts = screen_passes(plan, start, index, budgets, candidates, spool)
    return keep_screened(plan, candidates, counts, spool)


def screen_passes(
    plan: ExperimentPlan,
    start: Path,
    index: Path,
    budgets: dict[str, Any],
    candidates: list[dict[str, Any]],
    spool: ExperimentSpool,
    suffix: str = "",
) -> dict[str, int]:
    """Per candidate id, how many of the ``screen_samples`` samples (stages ``screen-<n><suffix>``, seed
    ``seed + n``) answered it right (``cem``)."""
    arm = plan.baseline_arm
    counts = {str(r["id"]): 0 for r in candidates}
    for sample in range(1, plan.screen_samples + 1):
        stage = EvaluationStage(
            key=f"screen-{sample}{suffix}",
            role="screen",
            method=arm.method,
            model=str(start),
            params={},
            temperature=plan.temperature,
            seed=plan.seed + sample,
            sample=sample,
            engine=plan.eval_engine,  # vLLM where installed: the screen fits a CPU beforehand (~2.6 s a question)
        )
        for record in run_stage(spool, stage, candidates, index, budgets, plan.judge):
            counts[str(record["id"])] += int(bool(record["cem"]))
    return counts


def keep_screened(
    plan: ExperimentPlan,
    candidates: list[dict[str, Any]],
    counts: dict[str, int],
    spool: ExperimentSpool,
    more: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The screen's rule (:func:`screened_rows`) over ``candidates`` with their pass counts; ``screen_yield.json``
    (with ``more``) and the log line."""
    kept = screened_rows(
        candidates,
        counts,
        samples=plan.screen_samples,
        low=plan.screen_min,
        high=plan.screen_max,
        unscreened_share=plan.screen_unscreened_share,
        seed=plan.seed,
    )
    passes = Counter(counts[str(r["id"])] for r in candidates)
    write_json(
        spool.root / "screen_yield.json",
        {
            "candidates": len(candidates),
            "kept": len(kept),
            "by_passes": {str(n): passes[n] for n in sorted(passes)},
            "samples": plan.screen_samples,
            "min": plan.screen_min,
            "max": plan.screen_max,
            **(more or {}),
        },
    )
    spool.log(
        f"screen: {len(kept)} of {len(candidates)} kept (passes {sorted(counts[str(r['id'])] for r in kept)})"
    )
    return kept


def _pool(plan: ExperimentPlan, start: Path) -> tuple[list[dict[str, Any]], list[str]]:
    pool = candidate_rows(plan, start)  # the whole list, never a candidates.jsonl a part or combination wrote
    if not pool:
        raise StageFailed(
            "screen", f"every training question of {plan.questions} is in the warm start's demonstrations"
        )
    return pool, [str(r["id"]) for r in pool]


def screen_part(
    plan: ExperimentPlan, start: Path, index: Path, budgets: dict[str, Any], spool: ExperimentSpool
) -> Path:
    """``--screen-part K/N``: part K of the candidate list (:func:`part_bounds`) screened alone, with the whole
    screen's seeds, in stages ``screen-<n>-part-K-of-N``; ``screen_part.json`` holds its pass counts. The part's
    candidates and kept rows go to ``questions/{candidates,train}-part-K-of-N.jsonl``, never to the files a
    training run would take for the whole list."""
    assert plan.screen_part is not None
    part, of = plan.screen_part
    pool, ids = _pool(plan, start)
    low, high = part_bounds(len(pool), part, of)
    rows = pool[low:high]
    if not rows:
        raise StageFailed("screen", f"part {part} of {of} is empty: the list has {len(pool)} candidates")
    name = f"part-{part}-of-{of}"
    spool.log(f"screen: {name}, candidates {low + 1}..{high} of {len(pool)}")
    write_rows(spool.root / "questions" / f"candidates-{name}.jsonl", rows)
    started = time.perf_counter()
    counts = screen_passes(plan, start, index, budgets, rows, spool, suffix=f"-{name}")
    spool.add_phase("screen", time.perf_counter() - started)
    kept = keep_screened(plan, rows, counts, spool, {"part": part, "of": of, "pool": len(pool)})
    train_file = spool.root / "questions" / f"train-{name}.jsonl"
    write_rows(train_file, kept)
    seconds = sum(
        float((read_json(spool.stage(f"screen-{n}-{name}") / "manifest.json") or {}).get("seconds") or 0)
        for n in range(1, plan.screen_samples + 1)
    )  # the samples' own seconds, a resumed part's included
    write_json(
        spool.root / "screen_part.json",
        {
            "part": part,
            "of": of,
            "pool": len(pool),
            "pool_sha256": pool_sha256(ids),
            "ids": ids[low:high],
            "passes": {str(r["id"]): counts[str(r["id"])] for r in rows},
            "samples": plan.screen_samples,
            "min": plan.screen_min,
            "max": plan.screen_max,
            "seed": plan.seed,
            "temperature": plan.temperature,
            "seconds": round(seconds, 1),
            "host": socket.gethostname(),
        },
    )
    spool.log(f"screen: {name} in screen_part.json (commit it as {name}.json; --screen-parts combines them)")
    return train_file


def combined_parts(plan: ExperimentPlan, start: Path, spool: ExperimentSpool) -> Path:
    """``--screen-parts``: the parts' pass counts combined (:func:`combine_parts` checks them against this run's
    candidate list), no screen here; a part missing leaves its candidates out (a random subset, the list being
    shuffled). ``questions/candidates.jsonl`` is the parts' candidates in list order, ``questions/train.jsonl``
    those kept by the screen's rule."""
    assert plan.screen_parts is not None
    pool, ids = _pool(plan, start)
    try:
        parts = read_screen_parts(plan.screen_parts)
        counts, present = combine_parts(
            parts, ids, samples=plan.screen_samples, seed=plan.seed, temperature=plan.temperature
        )
    except PlanError as exc:
        raise StageFailed("screen parts", exc.message) from None
    first = parts[0][1]
    of = first["of"]
    rows = [row for k in present for row in pool[slice(*part_bounds(len(pool), k, of))]]
    missing = [k for k in range(1, of + 1) if k not in present]
    spool.log(
        f"screen: parts {', '.join(map(str, present))} of {of} combined (missing: "
        f"{', '.join(map(str, missing)) or 'none'}), {len(rows)} of the pool's {len(pool)} candidates "
        f"({100 * len(rows) / len(pool):.1f}%, a random subset of the shuffled pool)"
    )
    if (first["min"], first["max"]) != (plan.screen_min, plan.screen_max):
        spool.log(
            f"screen: the parts were screened for {first['min']}..{first['max']} passes; "
            f"kept here with this run's {plan.screen_min}..{plan.screen_max}"
        )
    write_rows(spool.root / "questions" / "candidates.jsonl", rows)
    kept = keep_screened(plan, rows, counts, spool, {"pool": len(pool), "parts": present, "of": of})
    if not kept:
        raise StageFailed("screen", "no question kept")
    train_file = spool.root / "questions" / "train.jsonl"
    write_rows(train_file, kept)
    return train_file
