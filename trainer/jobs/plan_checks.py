"""The plan's checks: each raises :class:`PlanError` naming the flag at fault before any model loads (a split
file's ids, the question file's lines, the counts and budgets, the judge, the index folder, ``--set``'s trainer
values, ``--screen-part`` and the ``--screen-parts`` files)."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
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


# A screen part's file (screen_part.json in a --screen-part run's spool; committed as part-K-of-N.json): each field
# and its type. ``passes`` maps each of the part's ``ids`` to its right samples.
PART_FIELDS: dict[str, type | tuple[type, ...]] = {
    "part": int, "of": int, "pool": int, "pool_sha256": str, "ids": list, "passes": dict, "samples": int,
    "min": int, "max": int, "seed": int, "temperature": (int, float), "seconds": (int, float), "host": str,
}  # fmt: skip


def part_bounds(pool: int, part: int, of: int) -> tuple[int, int]:
    """Part ``part`` of ``of`` of a list of ``pool``: the slice ``[⌊(part-1)·pool/of⌋, ⌊part·pool/of⌋)``, contiguous
    parts in list order whose sizes differ by at most 1 (the later parts the larger)."""
    return (part - 1) * pool // of, part * pool // of


def parse_screen_part(text: str | None, screen_only: bool) -> tuple[int, int] | None:
    """``--screen-part K/N`` as ``(K, N)``: a part's screen alone, so only with ``--screen-only``."""
    if text is None:
        return None
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not found:
        raise PlanError("--screen-part", f"{text!r}: K/N, part K of N (e.g. 2/5)")
    part, of = int(found[1]), int(found[2])
    if of < 1 or not 1 <= part <= of:
        raise PlanError("--screen-part", f"{text!r}: need 1 ≤ K ≤ N")
    if not screen_only:
        raise PlanError("--screen-part", "needs --screen-only (a part's screen is not a training list)")
    return part, of


def check_screen_parts(args: argparse.Namespace) -> None:
    if args.screen_parts is None:
        return
    if args.screen_part is not None:
        raise PlanError("--screen-parts", "and --screen-part: combine the parts, or screen one, not both")
    if args.screen_samples == 0:
        raise PlanError("--screen-parts", "needs the screen (--screen-samples as the parts were screened)")
    read_screen_parts(args.screen_parts)


def read_screen_parts(path: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The screen parts of ``path`` (a folder's ``part-*.json``, or one file), each checked for its fields and their
    types; :class:`PlanError` (``--screen-parts``) names the file and the field."""
    files = sorted(path.glob("part-*.json")) if path.is_dir() else [path] if path.is_file() else []
    if not files:
        what = "no part-*.json in the folder" if path.is_dir() else "no such file or folder"
        raise PlanError("--screen-parts", f"{path}: {what}")
    parts = []
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PlanError("--screen-parts", f"{file}: not a screen part's JSON ({exc})") from None
        if not isinstance(data, dict):
            raise PlanError("--screen-parts", f"{file}: not a screen part (a JSON object)")
        for name, kind in PART_FIELDS.items():
            if name not in data:
                raise PlanError("--screen-parts", f"{file}: no field {name!r}")
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, kind):
                raise PlanError("--screen-parts", f"{file}: field {name!r} is not a {_kind(kind)}")
        if not 1 <= data["part"] <= data["of"]:
            raise PlanError("--screen-parts", f"{file}: field 'part' {data['part']} is not 1..{data['of']}")
        ids = [str(qid) for qid in data["ids"]]
        passes = data["passes"]
        if set(passes) != set(ids) or len(ids) != len(set(ids)):
            raise PlanError("--screen-parts", f"{file}: field 'passes' does not count each of 'ids' once")
        if not all(isinstance(n, int) and 0 <= n <= data["samples"] for n in passes.values()):
            raise PlanError(
                "--screen-parts", f"{file}: field 'passes' has a count not in 0..{data['samples']}"
            )
        parts.append((file, {**data, "ids": ids}))
    return parts


def _kind(kind: type | tuple[type, ...]) -> str:
    return (
        "number"
        if isinstance(kind, tuple)
        else {"int": "integer", "str": "string", "list": "list"}.get(kind.__name__, "object")
    )


PART_MUST_AGREE = ("of", "pool", "pool_sha256", "samples", "min", "max", "seed")


def pool_sha256(ids: list[str]) -> str:
    """The candidate list's fingerprint in a screen part: its ids joined by newlines."""
    return hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()


def combine_parts(
    parts: list[tuple[Path, dict[str, Any]]], ids: list[str], *, samples: int, seed: int, temperature: float
) -> tuple[dict[str, int], list[int]]:
    """The parts' pass counts together and the parts present (in order), each part checked: alike in
    :data:`PART_MUST_AGREE`, there once, screened with this run's samples, seed and temperature, and its ids part K
    of ``ids`` (this run's candidate list); :class:`PlanError` names the file and what differs."""
    first_file, first = parts[0]
    digest = pool_sha256(ids)
    seen: dict[int, Path] = {}
    counts: dict[str, int] = {}
    for file, part in parts:
        for key in PART_MUST_AGREE:
            if part[key] != first[key]:
                raise PlanError(
                    "--screen-parts", f"{file}: {key} {part[key]!r}, but {first_file}'s is {first[key]!r}"
                )
        k, of = part["part"], part["of"]
        if k in seen:
            raise PlanError("--screen-parts", f"{file}: part {k} of {of} again (also {seen[k]})")
        seen[k] = file
        for key, flag, mine in (
            ("samples", "--screen-samples", samples),
            ("seed", "--seed", seed),
            ("temperature", "--temperature", temperature),
        ):
            if part[key] != mine:
                raise PlanError(
                    "--screen-parts", f"{file}: screened with {key} {part[key]}, this run's {flag} is {mine}"
                )
        if (part["pool"], part["pool_sha256"]) != (len(ids), digest):
            raise PlanError(
                "--screen-parts",
                f"{file}: from another candidate list ({part['pool']} candidates, sha256 "
                f"{part['pool_sha256'][:12]}…; this run's: {len(ids)}, {digest[:12]}…): check --questions, --split, "
                "--seed, --train-limit, --keep-guessable and the start model",
            )
        low, high = part_bounds(len(ids), k, of)
        if part["ids"] != ids[low:high]:
            raise PlanError(
                "--screen-parts",
                f"{file}: its ids are not part {k} of {of} (candidates {low + 1}..{high}) of the list",
            )
        counts.update(part["passes"])
    return counts, sorted(seen)
