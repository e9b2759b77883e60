"""An experiment's plan from the command line: arms, seeds, models, questions, screen, budgets, judge, deadline.

:func:`plan_from_args` checks everything a run can get wrong before any model loads — a file that is missing, a
question file's bad line (named with its line number), a split naming ids the question file lacks, an arm's
method or weight out of range, a budget or judge setting the rollout cannot run with — and raises
:class:`PlanError` naming the flag at fault. The arms differ in their reward alone (HiPRAG's λp, Eq. 4, by default:
``outcome`` λp = 0 is the baseline, ``process`` λp = 0.4).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.judge_spec import JudgeSpec
from trainer.jobs import arms
from trainer.jobs.arms import Arm
from trainer.jobs.plan_checks import (
    FLAG_OF_FIELD,
    PlanError,
    check_counts,
    check_index,
    check_questions,
    check_screen_parts,
    judge_of,
    parse_screen_part,
    parse_trainer_values,
    read_split,
    split_rows,
)

REPO = Path(__file__).resolve().parents[2]
WARM_START_RECIPE = REPO / "demo" / "experiment2_warm_start.toml"
DEFAULT_ARMS = ("outcome=hiprag:lambda_p=0.0", "process=hiprag:lambda_p=0.4")
SHARED_DATA = Path("../shared/data/wiki_multihop")
EVAL_ENGINES = ("transformers", "vllm")


@dataclass
class ExperimentPlan:
    work: Path  # models, the index and the trainers' folders (large; stays on the machine)
    out: Path  # the experiment spool (small files only)
    corpus: Path
    questions: Path
    arms: tuple[Arm, ...]
    baseline: str
    gguf: Path | None = None
    start_model: Path | None = None
    warm_start_recipe: Path = WARM_START_RECIPE
    name: str = ""
    seed: int = 0
    seeds: int = 1
    steps: int = 40
    learning_rate: float = 5e-5
    temperature: float = 0.7
    num_generations: int = 8
    max_turns: int = 4
    max_rollout_tokens: int = 768
    train_limit: int = 64
    keep_guessable: bool = False
    eval_limit: int = 200
    split: Path | None = None
    split_train: tuple[str, ...] = ()
    split_held_out: tuple[str, ...] = ()
    screen_samples: int = 3
    screen_min: int = 1
    screen_max: int = 2  # samples - 1: answered in some but not all
    judge: JudgeSpec = field(default_factory=lambda: JudgeSpec(kind="evidence"))
    deadline: float = 0.0
    eval_reserve: float = 120.0
    concurrent: int = 0  # trainers at once (0: all)
    gpu_memory_per_run: float = 0.0  # GiB per trainer on CUDA (0: estimated from the model's size)
    index: Path | None = (
        None  # a built index folder (retrieval.index), used instead of building BM25 in --work
    )
    algorithm: str = "grpo"
    trainer_values: dict[str, Any] = field(default_factory=dict)  # --set: trainer config values, every arm's
    screen_unscreened_share: float = 0.0
    eval_batch_size: int = 0  # questions per evaluation batch (0: all at once)
    eval_engine: str = "transformers"
    screen_only: bool = False
    screen_part: tuple[int, int] | None = None  # --screen-part K/N: part K of the candidates in N, alone
    screen_parts: Path | None = None  # --screen-parts: the screened parts combined instead of screening here
    smoke: bool = False

    @property
    def seed_values(self) -> list[int]:
        """Seed k of pair k: ``seed + k`` (both arms of a pair train with it)."""
        return [self.seed + k for k in range(self.seeds)]

    @property
    def methods(self) -> list[str]:
        """The arms' methods, each once, in arm order (a start evaluation per method)."""
        return list(dict.fromkeys(arm.method for arm in self.arms))

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    @property
    def baseline_arm(self) -> Arm:
        return self.arm(self.baseline)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m trainer.jobs experiment",
        description="Run an experiment's stages without the web app and write its experiment spool (--out), "
        "which manage.py replay_spool (or the Imports page, packed as .tar.gz) brings into searchlab.",
    )
    p.add_argument("--work", type=Path, required=True, help="models, index and trainer folders (stay here)")
    p.add_argument("--out", type=Path, required=True, help="the experiment spool (small files); resumable")
    p.add_argument("--name", default="", help="the experiment's name (default: its arms, steps and device)")
    p.add_argument("--corpus", type=Path, default=SHARED_DATA / "corpus.jsonl")
    p.add_argument("--questions", type=Path, default=SHARED_DATA / "questions.jsonl")
    p.add_argument("--gguf", type=Path, help="the base model's GGUF file (agent.setup_model converts it)")
    p.add_argument("--start-model", type=Path, help="a start model folder (no base model, no warm start)")
    p.add_argument(
        "--warm-start-recipe", type=Path, default=WARM_START_RECIPE, help="trainer.warm_start's TOML"
    )
    p.add_argument(
        "--arm",
        action="append",
        dest="arms",
        metavar="NAME=METHOD[:KEY=VALUE,...]",
        help=f"an arm (repeat; default {' and '.join(DEFAULT_ARMS)}): its reward method and weights",
    )
    p.add_argument("--baseline", default="", help="the baseline arm (default: the first)")
    _training_flags(p)
    _run_flags(p)
    return p


def _training_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--seeds", type=int, default=1, help="seed pairs: seeds --seed .. --seed+N-1, every arm each"
    )
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--temperature", type=float, default=0.7, help="training's and the screen's sampling")
    p.add_argument("--num-generations", type=int, default=8)
    p.add_argument("--max-turns", type=int, default=4)
    p.add_argument("--max-rollout-tokens", type=int, default=768)
    p.add_argument("--train-limit", type=int, default=64, help="training candidates before the screen")
    p.add_argument(
        "--keep-guessable",
        action="store_true",
        help="keep training questions answerable without evidence (scoring.guessable), left out by default",
    )
    p.add_argument(
        "--eval-limit", type=int, help="the first N held-out questions (default 200; --split: all)"
    )
    p.add_argument(
        "--split", type=Path, help="a split file (bench/experiment3_split.py's): train and held_out ids"
    )
    p.add_argument("--screen-samples", type=int, default=3, help="0: no screen")
    p.add_argument("--screen-min", type=int, default=1)
    p.add_argument(
        "--screen-max", type=int, default=-1, help="most passes kept (default: samples - 1, some but not all)"
    )
    p.add_argument("--judge", default="evidence", help="an agent.judge_spec kind, or an http(s):// endpoint")
    p.add_argument("--judge-model", default="", help="the model the judge endpoint serves")
    p.add_argument("--judge-api-key-env", default="", help="the variable holding the judge endpoint's key")
    p.add_argument(
        "--judge-spec",
        default="",
        help="the whole judge as agent.judge_spec.JudgeSpec JSON (overrides --judge)",
    )
    p.add_argument(
        "--screen-unscreened-share", type=float, default=0.0, help="a share of the kept set drawn unscreened"
    )
    p.add_argument("--algorithm", default="grpo", help="the trainer's algorithm (trainer.config.ALGORITHMS)")
    p.add_argument(
        "--set",
        action="append",
        dest="trainer_set",
        metavar="PATH=JSON",
        help='a trainer config value every arm trains with (repeat): training.lr_scheduler_type="cosine"',
    )


def _run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--deadline", type=float, default=0, help="seconds from start to be done by (0: none)")
    p.add_argument(
        "--eval-reserve", type=float, default=120, help="seconds of --deadline kept for evaluations"
    )
    p.add_argument("--concurrent", type=int, default=0, help="trainers at once (0: every arm and seed)")
    p.add_argument(
        "--gpu-memory-per-run",
        type=float,
        default=0,
        help="GiB a trainer needs on CUDA (0: estimated from the model's size); fewer run at once if short",
    )
    p.add_argument("--index", type=Path, help="a built index folder (used instead of BM25 over --corpus)")
    p.add_argument("--eval-batch-size", type=int, default=0, help="questions per evaluation batch (0: all)")
    p.add_argument(
        "--eval-engine", default="transformers", choices=EVAL_ENGINES, help="the evaluations' engine"
    )
    p.add_argument("--screen-only", action="store_true", help="stop after the screen (questions/train.jsonl)")
    p.add_argument(
        "--screen-part",
        metavar="K/N",
        help="with --screen-only: screen part K alone of the candidates cut in N contiguous parts (sizes differ by "
        "at most 1); writes screen_part.json (commit it as part-K-of-N.json) and questions/train-part-K-of-N.jsonl, "
        "never questions/train.jsonl",
    )
    p.add_argument(
        "--screen-parts",
        type=Path,
        metavar="PATH",
        help="a folder of part-*.json (--screen-part's screen_part.json files), or one: the training list is the "
        "parts' pass counts combined, no screen here (missing parts: the list covers the parts present)",
    )
    p.add_argument("--smoke", action="store_true", help="a tiny random model, a few questions, 2 steps")


def plan_from_args(args: argparse.Namespace) -> ExperimentPlan:
    """The checked plan of parsed arguments; :class:`PlanError` names the first flag at fault."""
    for flag, path in (("--corpus", args.corpus), ("--questions", args.questions)):
        if not path.is_file() and not (flag == "--corpus" and args.index):
            raise PlanError(flag, f"{path}: no such file")
    check_index(args.index)
    if not (args.smoke or args.start_model or (args.gguf and args.gguf.is_file())):
        raise PlanError("--gguf", "FILE (the base model), --start-model FOLDER, or --smoke is needed")
    if args.start_model and not (args.start_model / "config.json").is_file():
        raise PlanError("--start-model", f"{args.start_model}: not a model folder (no config.json)")
    arms = tuple(parse_arm(text) for text in (args.arms or DEFAULT_ARMS))
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        raise PlanError("--arm", f"arms with different names, got {names}")
    baseline = args.baseline or names[0]
    if baseline not in names:
        raise PlanError("--baseline", f"{baseline!r} is not an arm ({', '.join(names)})")
    split_train, split_held_out = read_split(args.split) if args.split else ((), ())
    check_counts(args)
    screen_part = parse_screen_part(args.screen_part, args.screen_only)
    check_screen_parts(args)
    judge = judge_of(args)
    trainer_values = parse_trainer_values(args.trainer_set or ())
    check_questions(args.questions, args.split, split_train, split_held_out)
    eval_limit = args.eval_limit or (len(split_held_out) if args.split else 200)
    plan = ExperimentPlan(
        **{k: getattr(args, k) for k in PLAIN_FIELDS},
        arms=arms,
        baseline=baseline,
        split_train=split_train,
        split_held_out=split_held_out,
        eval_limit=eval_limit,
        judge=judge,
        trainer_values=trainer_values,
        screen_part=screen_part,
    )
    plan = smoke_settings(plan) if plan.smoke else plan
    check_arm_configs(plan)
    return plan


PLAIN_FIELDS = (
    "work out corpus questions gguf start_model warm_start_recipe name seed seeds steps learning_rate temperature "
    "num_generations max_turns max_rollout_tokens train_limit keep_guessable split screen_samples screen_min "
    "screen_max deadline eval_reserve concurrent gpu_memory_per_run screen_only smoke index algorithm "
    "screen_unscreened_share eval_batch_size eval_engine screen_parts"
).split()


def smoke_settings(plan: ExperimentPlan) -> ExperimentPlan:
    """``--smoke``: 2 steps of 2 rollouts on 8 candidates, up to 6 held-out questions, short rollouts, every
    candidate kept by the screen (a random model answers nothing)."""
    plan.steps, plan.train_limit, plan.num_generations = 2, 8, 2
    plan.eval_limit = min(6, plan.eval_limit)
    plan.max_rollout_tokens, plan.screen_min = 96, 0
    return plan


def parse_arm(text: str) -> Arm:
    """``NAME=METHOD[:KEY=VALUE,...]`` (``process=hiprag:lambda_p=0.4``), the weights checked as the method's."""
    try:
        return arms.parse_arm(text, check=True)
    except arms.ArmError as exc:
        raise PlanError("--arm", exc.message) from None


def check_arm_configs(plan: ExperimentPlan) -> None:
    """Every arm's trainer config built once (trainer.config's rules) before anything runs; the flag is named."""
    from trainer.config import ConfigError
    from trainer.jobs.training import arm_config

    where = Path("(checked)")
    for arm in plan.arms:
        try:
            arm_config(plan, arm, plan.seed, where, where, where, where)
        except ConfigError as exc:
            flag = FLAG_OF_FIELD.get(exc.field, "--set")
            raise PlanError(flag, f"{arm.name}: {exc}") from None


__all__ = ["PlanError", "read_split", "split_rows"]
