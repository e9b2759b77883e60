"""The plan's checks: each raises :class:`PlanError` naming the flag at fault before any model loads (a split
file's ids, the question file's lines, the counts and budgets, the judge, the index folder, ``--set``'s trainer
values)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.budgets import BudgetError, check_budget
from agent.judge_spec import EXPERIMENT, JudgeSpec, JudgeSpecError, judge_from_option, judge_spec_check


class PlanError(ValueError):
    """A setting the experiment cannot run with: ``flag`` names it (``--split``), ``message`` says why."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"{flag} {message}")
        self.flag, self.message = flag, message


def read_split(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A split file's training pool and held-out ids (``bench/experiment3_split.py``'s ``train`` and ``held_out``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        train, held_out = tuple(map(str, data["train"])), tuple(map(str, data["held_out"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PlanError(
            "--split", f"{path}: not a split file with 'train' and 'held_out' ids ({exc})"
        ) from None
    both = sorted(set(train) & set(held_out))
    if both:  # a held-out question trained on would measure recall, not the method
        raise PlanError("--split", f"{path}: {len(both)} ids are both train and held_out, e.g. {both[0]!r}")
    return train, held_out


def check_counts(args: argparse.Namespace) -> None:
    for name in ("steps", "num_generations", "train_limit", "seeds"):
        if getattr(args, name) < 1:
            raise PlanError(f"--{name.replace('_', '-')}", f"{getattr(args, name)}: must be at least 1")
    if args.eval_limit is not None and args.eval_limit < 1:
        raise PlanError("--eval-limit", f"{args.eval_limit}: must be at least 1")
    for name in ("max_turns", "max_rollout_tokens"):
        try:
            check_budget(name, getattr(args, name))
        except BudgetError as exc:
            raise PlanError(f"--{name.replace('_', '-')}", exc.message) from None
    if args.deadline < 0 or args.eval_reserve < 0:
        raise PlanError("--deadline", "and --eval-reserve are seconds, 0 or more")
    if args.concurrent < 0 or args.gpu_memory_per_run < 0:
        raise PlanError("--concurrent", "and --gpu-memory-per-run are 0 or more")
    if args.screen_max < 0:  # the default: answered in some but not all samples, as the web app's screen
        if args.screen_samples == 1 and args.screen_min > 0:
            raise PlanError(
                "--screen-samples",
                "1: some but not all of one sample is none; take 2 or more, or give --screen-max",
            )
        args.screen_max = args.screen_samples - 1
    if args.screen_samples < 0 or not 0 <= args.screen_min <= args.screen_max:
        raise PlanError("--screen-min", f"{args.screen_min}..{args.screen_max}: need 0 ≤ min ≤ max")
    if not 0.0 <= args.screen_unscreened_share < 1.0:
        raise PlanError("--screen-unscreened-share", f"{args.screen_unscreened_share}: a share in [0, 1)")
    if args.eval_batch_size < 0:
        raise PlanError("--eval-batch-size", f"{args.eval_batch_size}: 0 (all at once) or more")
    if args.screen_only and args.screen_samples == 0:
        raise PlanError("--screen-only", "needs a screen (--screen-samples 1 or more)")


def judge_of(args: argparse.Namespace) -> JudgeSpec:
    try:
        if args.judge_spec:
            spec = _judge_spec(args.judge_spec)
        else:
            spec = judge_from_option(
                args.judge, use=EXPERIMENT, model=args.judge_model, api_key_env=args.judge_api_key_env
            )
        judge_spec_check(spec, EXPERIMENT)
    except JudgeSpecError as exc:
        flag = "--judge" if exc.field in ("kind", "base_url") else f"--judge-{exc.field.replace('_', '-')}"
        raise PlanError("--judge-spec" if args.judge_spec else flag, exc.message) from None
    return spec


def _judge_spec(text: str) -> JudgeSpec:
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError("not an object")
        return JudgeSpec.from_json(data)
    except (ValueError, TypeError) as exc:
        raise PlanError("--judge-spec", f"not a judge spec as JSON ({exc})") from None


def check_index(folder: Path | None) -> None:
    from retrieval.index import METADATA_FILE

    if folder is not None and not (folder / METADATA_FILE).is_file():
        raise PlanError("--index", f"{folder}: not an index folder (no {METADATA_FILE})")


def parse_trainer_values(items: Sequence[str]) -> dict[str, Any]:
    """``--set PATH=JSON`` values as a nested dict (a value that is not JSON is taken as a string)."""
    from trainer.config import config_field, set_path

    values: dict[str, Any] = {}
    for item in items:
        path, sep, text = item.partition("=")
        if not sep or not path:
            raise PlanError("--set", f"{item!r}: PATH=VALUE, e.g. training.lr_scheduler_type=cosine")
        try:
            config_field(path)
        except (KeyError, ValueError) as exc:
            raise PlanError("--set", f"{path}: no trainer config field ({exc})") from None
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        set_path(values, path, value)
    return values


# The trainer config fields a flag of their own sets (any other comes from --set).
FLAG_OF_FIELD = {
    "training.max_steps": "--steps",
    "training.seed": "--seed",
    "training.learning_rate": "--learning-rate",
    "training.temperature": "--temperature",
    "training.num_generations": "--num-generations",
    "rollout.max_turns": "--max-turns",
    "rollout.max_rollout_tokens": "--max-rollout-tokens",
    "algorithm": "--algorithm",
}


def check_questions(
    questions: Path, split: Path | None, split_train: tuple[str, ...], split_held_out: tuple[str, ...]
) -> None:
    """A bad line is named (file:line) before any model loads; the splits the run draws on must exist."""
    from trainer.config import ConfigError
    from trainer.train import read_question_rows

    try:
        rows = read_question_rows(questions)
    except ConfigError as exc:
        raise PlanError("--questions", str(exc).split(": ", 1)[-1]) from None
    if split is None:
        for name in ("train", "test"):
            if not split_rows(rows, name):
                raise PlanError(
                    "--questions", f"{questions}: no question whose metadata.split starts with {name!r}"
                )
        return
    known = {str(r["id"]) for r in rows}
    for name, ids in (("train", split_train), ("held_out", split_held_out)):
        missing = [qid for qid in ids if qid not in known]
        if missing:
            raise PlanError(
                "--split", f"{split}: {len(missing)} {name} ids not in --questions, e.g. {missing[0]!r}"
            )


def split_rows(rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """``webapp.experiments.inputs``' rule: ``metadata.split`` starts with ``split``."""
    return [r for r in rows if str((r.get("metadata") or {}).get("split", "")).startswith(split)]
