"""Experiment #2 (issue 21) on one GPU machine, without the web app: λp = 0 against λp = 0.4 in HiPRAG's format.

The web app's experiment (``manage.py experiment``, docs/experiment.md) runs its stages one after another, which on
a GPU leaves the card idle most of the time: a 135M policy's step is a few hundred small kernel launches per token.
This script runs the same stages with the same code (``trainer.warm_start``, ``trainer.train``,
``agent.evaluate``, ``scoring.paired_bootstrap``) on a bare GPU box that has torch and transformers but no
database, and runs what is independent at once: the two arms' trainers side by side, the start model's
evaluation while they train. It writes everything small into ``--out`` as it goes (a stage's files as soon as it
ends, and the whole folder bundled every 20 s), so a run cut short still returns what it finished; the arms'
``runs/*/metrics.jsonl`` plot with ``bench/experiment_curves.py``. Stages, each skipped when its output exists (a
rerun on the same machine resumes):

1. the BM25 index of the corpus; the base model from the GGUF file (``agent.setup_model.convert``);
2. the warm start of ``demo/experiment2_warm_start.toml`` (HiPRAG's format, half the search demonstrations with a
   redundant search), with TRL's plain SFT path (the frozen-layer cache is a CPU economy);
3. the training questions: train-split questions the warm start never saw (not in its ``demonstrations.jsonl``),
   without those answerable without evidence (``scoring.guessable``: yes/no, or the answer named among the
   question's options; ``--keep-guessable`` keeps them, as the H100 run of 2026-11-27 did, whose λp = 0 arm learnt
   to answer them without searching), shuffled with the seed, the first ``--train-limit``;
4. the screen: ``--screen-samples`` samples of the start model on them at the training temperature (a seed per
   sample), the questions answered (cover EM) in ``--screen-min``..``--screen-max`` of them kept
   (``webapp.experiments.screening``'s rule; pilot d's settings by default);
5. both arms trained (``python -m trainer.train``, two processes), the start model evaluated meanwhile;
6. each trained model evaluated on the same ``--eval-limit`` test questions, greedy, in the training budgets;
7. the table: each evaluation's report row, and paired-bootstrap 95% intervals (2,000 resamples) of
   process − outcome (trained) and of each trained model − the start.

**Seeds** (``--seeds N``, Experiment #3, issue 35): N seed pairs, seed k = ``--seed`` + k, the two arms of a pair
trained with that seed (the same start, questions and order; the arms differ in λp alone), all 2N trainers at once
and stopped at the same step; each pair's files under ``out/seeds/<k>/`` (its trainers' ``runs/<arm>/``, its
``eval_trained_<arm>.jsonl`` and ``table.json``), and ``out/experiment-3.json`` and ``experiment-3.md``:
``bench/experiment3_analysis.py``'s pooled two-level bootstrap and per-pair tables. **A split** (``--split
demo/experiment3_split.json``, ``bench/experiment3_split.py``): the training candidates are its training pool
(before the screen) and the evaluation its held-out questions (all of them unless ``--eval-limit``) instead of the
``train`` and ``test`` splits.

``--screen-only`` stops after the screen (``out/train_questions.jsonl`` and ``out/screen_yield.json``: candidates,
kept, questions by passes): the screen done on a CPU beforehand, whose list a GPU run given the same ``--out``
trains on without screening again.

``--smoke`` runs every stage on a tiny random model with a handful of questions, its warm start included (about
75 s on a CPU): the check before device time is spent. ``manage.py experiment_import BUNDLE`` (or the web app's
Imports page) brings the bundle into the web app as an experiment (``webapp.experiments.bundles``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import tomllib
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

ARMS = {"outcome": 0.0, "process": 0.4}  # HiPRAG's λp (Eq. 4): the outcome arm earns no process bonus
BASELINE = "outcome"
WARM_START_RECIPE = REPO / "demo" / "experiment2_warm_start.toml"


class StageFailed(Exception):
    """A stage that cannot go on; the run stops with its reason in the log (and what it finished in the bundle)."""

    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(f"{stage}: {reason}")


class Log:
    def __init__(self, out: Path) -> None:
        self.path = out / "log.txt"
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        line = f"[{time.perf_counter() - self.started:7.1f} s] {message}"
        print(line, flush=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def read_rows(path: Path) -> list[dict[str, Any]]:
    from trainer.train import read_question_rows

    return read_question_rows(path)


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    partial.rename(path)


def split_rows(rows: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """``webapp.experiments.inputs``' rule: ``metadata.split`` starts with ``split``."""
    return [r for r in rows if str((r.get("metadata") or {}).get("split", "")).startswith(split)]


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


# --- stage 1-2: index, base model, warm start ------------------------------------------------------------------


def ensure_index(corpus: Path, folder: Path, log: Log) -> None:
    from retrieval.index import METADATA_FILE, IndexConfig, build_index

    if (folder / METADATA_FILE).is_file():
        return
    started = time.perf_counter()
    build_index(corpus, folder, IndexConfig(kind="bm25"))
    log(f"index: BM25 over {corpus} in {time.perf_counter() - started:.0f} s")


def ensure_base_model(gguf: Path, folder: Path, log: Log) -> None:
    from agent.setup_model import convert

    if (folder / "config.json").is_file():
        return
    started = time.perf_counter()
    convert(gguf, folder)
    log(f"base model: {gguf.name} → {folder} in {time.perf_counter() - started:.0f} s")


# --smoke's warm start: the recipe's share of redundant searches and its plain SFT path (the one a GPU takes), on
# the tiny model's byte-level tokenizer (long turns) and 2 demonstrations: the check that the warm start runs on the
# machine at all, which a smoke without a warm start once missed.
SMOKE_WARM_START: dict[str, Any] = {
    "max_turn_tokens": 1000,
    "max_rollout_tokens": 6400,  # room for the redundant search at 1000-token turns
    "data": {"questions_per_method": 2},
    "training": {"epochs": 1, "batch_size": 2, "gradient_accumulation_steps": 1, "max_length": 8192},
}


def ensure_warm_start(
    base: Path, index: Path, questions: Path, folder: Path, out: Path, log: Log, *, smoke: bool = False
) -> None:
    if (folder / "config.json").is_file():
        return
    recipe = tomllib.loads(WARM_START_RECIPE.read_text(encoding="utf-8"))
    recipe.update(output_dir=str(folder), index=str(index))
    recipe["model"] = {**recipe.get("model", {}), "path": str(base), "torch_threads": 4}
    recipe["data"] = {**recipe["data"], "path": str(questions)}
    recipe["training"] = {**recipe["training"], "cache_frozen_layers": False}
    if smoke:
        recipe["max_turn_tokens"] = SMOKE_WARM_START["max_turn_tokens"]
        recipe["max_rollout_tokens"] = SMOKE_WARM_START["max_rollout_tokens"]
        recipe["data"].update(SMOKE_WARM_START["data"])
        recipe["training"].update(SMOKE_WARM_START["training"])
    config = out / "warm_start_config.json"
    config.write_text(json.dumps(recipe, indent=1), encoding="utf-8")
    started = time.perf_counter()
    log(f"warm start: {WARM_START_RECIPE.name} → {folder} (output in warm_start.log)")
    with (out / "warm_start.log").open("wb") as output:
        code = subprocess.run(
            [sys.executable, "-m", "trainer.warm_start", str(config)],
            cwd=REPO,
            stdout=output,
            stderr=subprocess.STDOUT,
        ).returncode
    if code != 0:
        tail = (
            (out / "warm_start.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        )
        raise StageFailed("warm start", f"exit {code}; warm_start.log ends:\n" + "\n".join(tail))
    log(f"warm start: done in {time.perf_counter() - started:.0f} s")


def unseen_train_rows(
    questions: Path,
    warm: Path,
    limit: int,
    seed: int,
    *,
    drop_guessable: bool = True,
    pool: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Train-split questions (the ``pool`` ids instead, a split's training pool) outside the warm start's
    demonstrations (and, with ``drop_guessable``, not guessable), shuffled with ``seed``, the first ``limit``."""
    from scoring.guessable import guessable

    seen: set[str] = set()
    demos = warm / "demonstrations.jsonl"
    if demos.is_file():
        for line in demos.read_text(encoding="utf-8").splitlines():
            seen.add(str(json.loads(line)["question_id"]))
    if pool is None:
        candidates = split_rows(read_rows(questions), "train")
    else:
        wanted = set(pool)
        candidates = [r for r in read_rows(questions) if str(r["id"]) in wanted]
    rows = [
        r
        for r in candidates
        if str(r["id"]) not in seen and not (drop_guessable and guessable(r["question"], r["golden_answers"]))
    ]
    random.Random(seed).shuffle(rows)
    return rows[:limit]


# --- evaluations -----------------------------------------------------------------------------------------------


def evaluate_model(
    model: str,
    rows: list[dict[str, Any]],
    index: Path,
    budgets: dict[str, Any],
    params: dict[str, Any],
    *,
    temperature: float = 0.0,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One record per question (HiPRAG's format, the evidence judge), as ``webapp.evaluation`` stores them."""
    from agent.backend_transformers import TransformersBackend
    from agent.evaluate import Judges, evaluate_sync
    from agent.rollout import PAPER_CONFIGS
    from retrieval.api import searcher_for_index

    backend = TransformersBackend.from_pretrained(model, threads=4, max_batch_size=256)
    config = replace(PAPER_CONFIGS["hiprag"], **budgets, temperature=temperature, seed=seed)
    result = evaluate_sync(
        backend,
        searcher_for_index(index),
        "hiprag",
        questions_of(rows),
        judges=Judges(evidence=True),
        config=config,
        params=params,
        batch_size=len(rows),
    )
    return [record_row(record) for record in result.records]


def record_row(record: Any) -> dict[str, Any]:
    """One evaluated question (an ``agent.evaluate.TrajectoryRecord``) as a line of ``eval_*.jsonl``."""
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
        # webapp.trajectories.services.trajectory_import's fields (manage.py experiment_import reads them):
        # the response in HiPRAG's format and each step's judge outcome, the evidence rule in its reply
        "format": "hiprag",
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


def ensure_eval(
    name: str, model: str, rows: list[dict[str, Any]], index: Path, out: Path, log: Log, **kwargs: Any
) -> list[dict[str, Any]]:
    path = out / f"eval_{name}.jsonl"
    if path.is_file():
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    started = time.perf_counter()
    records = evaluate_model(model, rows, index, **kwargs)
    write_rows(path, records)
    log(
        f"evaluation {name}: {len(records)} questions in {time.perf_counter() - started:.0f} s, {summary(records)}"
    )
    return records


def summary(records: list[dict[str, Any]]) -> str:
    n = max(1, len(records))
    return (
        f"CEM {sum(r['cem'] for r in records) / n:.3f}, "
        f"searches {sum(r['n_searches'] for r in records) / n:.2f}, "
        f"format ok {sum(r['format_ok'] for r in records) / n:.3f}"
    )


# --- training --------------------------------------------------------------------------------------------------


def arm_config(
    args: argparse.Namespace,
    arm: str,
    start: Path,
    train: Path,
    index: Path,
    out: Path,
    *,
    seed: int | None = None,
) -> Any:
    """The arm's trainer config: the web app experiment's (webapp.experiments.stage_specs.training_config with
    RUN_DEFAULTS) with pilot d's knobs; the arms differ in λp alone."""
    from trainer.config import DEMO_TRAINABLE_LAYERS, config_from_dict

    values = {
        "output_dir": str(out),
        "method": "hiprag",
        "algorithm": "grpo",
        "model": {"path": str(start), "trainable_layers": DEMO_TRAINABLE_LAYERS, "torch_threads": 4},
        "data": {"path": str(train)},
        "rollout": {
            "factory": "agent",
            "options": {"index": str(index), "judge": "evidence"},
            "max_turns": args.max_turns,
            "max_rollout_tokens": args.max_rollout_tokens,
        },
        "reward": {"params": {"lambda_p": ARMS[arm]}, "tiresrag_group_shaping": True},
        "training": {
            "max_steps": args.steps,
            "seed": args.seed if seed is None else seed,
            "learning_rate": args.learning_rate,
            "lr_scheduler_type": "constant",
            "questions_per_step": 1,
            "num_generations": args.num_generations,
            "temperature": args.temperature,
            "dynamic_sampling": True,
            "dynamic_sampling_max_draws": 2,
            "max_completion_length": args.max_rollout_tokens,
        },
        "logging": {"sample_every": 1},
    }
    return config_from_dict(values)


def start_training(config: Any, out: Path) -> subprocess.Popen[bytes]:
    folder = Path(config.output_dir)  # the trainer writes its validated config and the model in there
    folder.parent.mkdir(parents=True, exist_ok=True)
    path = folder.with_suffix(".json")
    path.write_text(json.dumps(config.to_dict(), indent=1), encoding="utf-8")
    log_file = (out / f"train_{folder.name}.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "trainer.train", str(path)],
        cwd=REPO,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )


def steps_done(folder: Path) -> int:
    """The last step a run logged in its ``metrics.jsonl`` (0: none yet)."""
    path = folder / "metrics.jsonl"
    if not path.is_file():
        return 0
    done = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            done = max(done, int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):  # a line being written
            continue
    return done


# --- the table -------------------------------------------------------------------------------------------------


def ratios(records: list[dict[str, Any]]) -> dict[str, Any]:
    from scoring.paired_bootstrap import question_ratios

    return {
        r["id"]: question_ratios(
            cem=r["cem"],
            em=r["em"],
            f1=r["f1"],
            format_ok=r["format_ok"],
            n_searches=r["n_searches"],
            over_search=r["over_search"],
            under_search=r["under_search"],
        )
        for r in records
    }


def table(evals: dict[str, list[dict[str, Any]]], seed: int) -> dict[str, Any]:
    from scoring.paired_bootstrap import METRICS, pair_by_key, paired_bootstrap

    rows = {name: {m: _pooled(ratios(records), m) for m in METRICS} for name, records in evals.items()}
    pairs = [(f"trained_{BASELINE}", f"trained_{arm}") for arm in ARMS if arm != BASELINE]
    pairs += [("start", f"trained_{arm}") for arm in ARMS]
    differences = {}
    for base, other in pairs:
        if base not in evals or other not in evals:
            continue
        keys, a, b = pair_by_key(ratios(evals[base]), ratios(evals[other]))
        found = paired_bootstrap(a, b, METRICS, seed=seed)
        differences[f"{other} − {base}"] = {
            "questions": len(keys),
            **{
                m: {k: getattr(d, k) for k in ("baseline", "method", "difference", "low", "high")}
                for m, d in found.items()
            },
        }
    return {"rows": rows, "differences": differences}


def _pooled(by_question: dict[str, Any], metric: str) -> float | None:
    numerator = sum(r[metric][0] for r in by_question.values())
    denominator = sum(r[metric][1] for r in by_question.values())
    return numerator / denominator if denominator else None


def markdown(result: dict[str, Any]) -> str:
    names = ("cem", "em", "f1", "average_searches", "osr", "usr", "format_ok_rate")
    lines = ["| model | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for model, row in result["rows"].items():
        lines.append(f"| {model} | " + " | ".join(_cell(row[m]) for m in names) + " |")
    for label, diff in result["differences"].items():
        lines += ["", f"**{label}** ({diff['questions']} paired questions, paired bootstrap 95% CI)", ""]
        lines += ["| metric | base | other | diff | 95% CI |", "|---|---:|---:|---:|---|"]
        for m in names:
            d = diff[m]
            interval = "—" if d["low"] is None else f"[{d['low']:+.3f}, {d['high']:+.3f}]"
            star = " *" if d["low"] is not None and (d["low"] > 0 or d["high"] < 0) else ""
            lines.append(
                f"| {m} | {_cell(d['baseline'])} | {_cell(d['method'])} | {_cell(d['difference'], '+')} | {interval}{star} |"
            )
    return "\n".join(lines) + "\n"


def _cell(value: float | None, sign: str = "") -> str:
    return "—" if value is None else f"{value:{sign}.3f}"


# --- packing ---------------------------------------------------------------------------------------------------


class Snapshot:
    """The run so far, copied into ``out`` (each arm's config, metrics, samples and heartbeat; the warm start's
    metrics and heartbeat; no model) and, with a ``bundle`` path, packed into that one .tar.gz — after every stage
    and every ``interval`` seconds from a thread, so a run killed at any point (a leased machine's time limit)
    returns what it had done, and where it was."""

    def __init__(self, out: Path, work: Path, bundle: Path | None, interval: float = 20.0) -> None:
        self.out, self.work, self.bundle, self.interval = out, work, bundle, interval
        self.warm: Path | None = None
        # (trainer folders' parent in work, their copies' parent in out): one pair per seed pair
        self.run_dirs: list[tuple[Path, Path]] = [(work / "runs", out / "runs")]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def start(self) -> None:
        self.take()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.take()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            self.take()

    def take(self) -> None:
        with self._lock:
            copies = [
                (runs / f"{arm}.json", copied / arm / "run_config.json")
                for runs, copied in self.run_dirs
                for arm in ARMS
            ]
            copies += [
                (runs / arm / name, copied / arm / name)
                for runs, copied in self.run_dirs
                for arm in ARMS
                for name in ("metrics.jsonl", "samples.jsonl", "progress.json")
            ]
            if self.warm is not None:
                copies += [
                    (self.warm / name, self.out / f"warm_start_{name}")
                    for name in ("metrics.jsonl", "progress.json", "warm_start.json")
                ]
            for source, target in copies:
                if source.is_file():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(source, target)
            if self.bundle is None:
                return
            partial = self.bundle.with_name(self.bundle.name + ".partial")
            with tarfile.open(partial, "w:gz") as archive:
                archive.add(self.out, arcname=self.out.name)
            partial.rename(self.bundle)


# --- main ------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="models, index and runs (large; stays here)")
    parser.add_argument("--out", type=Path, required=True, help="the small result files")
    parser.add_argument(
        "--bundle", type=Path, help="keep a .tar.gz of --out here, refreshed after every stage"
    )
    parser.add_argument("--corpus", type=Path, default=Path("../shared/data/wiki_multihop/corpus.jsonl"))
    parser.add_argument(
        "--questions", type=Path, default=Path("../shared/data/wiki_multihop/questions.jsonl")
    )
    parser.add_argument("--gguf", type=Path, help="the base model's GGUF file (agent.setup_model's)")
    parser.add_argument(
        "--start-model", type=Path, help="a start model folder (skips the base model and warm start)"
    )
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-rollout-tokens", type=int, default=768)
    parser.add_argument("--train-limit", type=int, default=64)
    parser.add_argument(
        "--keep-guessable",
        action="store_true",
        help="keep the training questions answerable without evidence (yes/no, or the answer named among the "
        "question's options; scoring.guessable), which are left out by default",
    )
    parser.add_argument(
        "--eval-limit",
        type=int,
        help="the first N held-out questions (default 200; with --split all of them)",
    )
    parser.add_argument(
        "--seeds", type=int, default=1, help="seed pairs: each arm trained with seeds --seed .. --seed+N-1"
    )
    parser.add_argument(
        "--split",
        type=Path,
        help="a split file (bench/experiment3_split.py's): its training pool and held-out questions",
    )
    parser.add_argument("--screen-samples", type=int, default=3)
    parser.add_argument("--screen-min", type=int, default=1)
    parser.add_argument("--screen-max", type=int, default=3)
    parser.add_argument(
        "--deadline",
        type=float,
        default=0,
        help="seconds from start by which to be done (0: none): the trainers get what is left minus "
        "--eval-reserve as training.max_seconds, so a leased machine's run ends with its evaluations",
    )
    parser.add_argument(
        "--eval-reserve", type=float, default=120, help="seconds kept for the trained evaluations"
    )
    parser.add_argument(
        "--screen-only",
        action="store_true",
        help="stop after the screen: out/train_questions.jsonl and screen_yield.json, to ship to a GPU run "
        "(which skips its screen when out/train_questions.jsonl exists)",
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny random model, a few questions, 2 steps")
    args = parser.parse_args(argv)
    for name in ("corpus", "questions"):
        if not getattr(args, name).is_file():
            parser.error(f"--{name} {getattr(args, name)}: no such file")
    if not (args.smoke or args.start_model or (args.gguf and args.gguf.is_file())):
        parser.error("give --gguf FILE (the base model), --start-model FOLDER, or --smoke")
    if args.start_model and not (args.start_model / "config.json").is_file():
        parser.error(f"--start-model {args.start_model}: not a model folder (no config.json)")
    if args.split is not None:
        try:
            split = json.loads(args.split.read_text(encoding="utf-8"))
            args.split_train, args.split_held_out = list(split["train"]), list(split["held_out"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            parser.error(f"--split {args.split}: not a split file with 'train' and 'held_out' ids ({exc})")
    if args.eval_limit is None:
        args.eval_limit = len(args.split_held_out) if args.split is not None else 200
    names = (
        "steps",
        "num_generations",
        "max_turns",
        "max_rollout_tokens",
        "train_limit",
        "eval_limit",
        "seeds",
    )
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
    if args.deadline < 0 or args.eval_reserve < 0:
        parser.error("--deadline and --eval-reserve are seconds, 0 or more")
    from trainer.config import ConfigError

    try:  # a bad question file fails here, naming its line, before any model is loaded
        rows = read_rows(args.questions)
    except ConfigError as exc:
        parser.error(f"--questions {str(exc).split(': ', 1)[-1]}")
    for split in () if args.split is not None else ("train", "test"):
        if not split_rows(rows, split):
            parser.error(
                f"--questions {args.questions}: no question whose metadata.split starts with {split!r}"
            )
    if args.split is not None:
        known = {str(r["id"]) for r in rows}
        for name in ("split_train", "split_held_out"):
            missing = [qid for qid in getattr(args, name) if qid not in known]
            if missing:
                parser.error(
                    f"--split {args.split}: {len(missing)} {name[6:]} ids not in --questions, e.g. {missing[0]!r}"
                )
    if args.smoke:
        args.steps, args.train_limit, args.eval_limit, args.num_generations = 2, 8, min(6, args.eval_limit), 2
        args.max_rollout_tokens, args.screen_min = 96, 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # A GPU image with JAX: whatever imports it (a library probing for it) would take 75% of the card per process
    # (seen on the H200: the driver and a trainer ran out of memory). JAX stays on the CPU, allocating as it goes.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    work, out = args.work.resolve(), args.out.resolve()
    log = Log(out)
    snapshot = Snapshot(out, work, args.bundle.resolve() if args.bundle else None)
    snapshot.start()
    try:
        return run(args, work, out, log, snapshot)
    except ConfigError as exc:  # a trainer or warm-start setting out of range, named by its field
        log(f"config error: {exc}")
        return 2
    except StageFailed as exc:
        log(f"failed: {exc}")
        return 1
    finally:
        snapshot.stop()


def run(args: argparse.Namespace, work: Path, out: Path, log: Log, snapshot: Snapshot) -> int:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    log(f"torch {torch.__version__}, GPU: {gpu}")
    index = work / "index-bm25"
    ensure_index(args.corpus.resolve(), index, log)
    start = start_model(args, work, index, out, log, snapshot)
    eval_rows = held_out_rows(args)[: args.eval_limit]
    describe(args, start, index, eval_rows, out)
    budgets = arm_config(args, BASELINE, start, work / "none", index, work / "none").agent_budgets()
    train_file = out / "train_questions.jsonl"
    if not train_file.is_file() and not screen(args, start, index, budgets, train_file, out, log):
        return 1
    snapshot.take()
    if args.screen_only:
        log(f"screen only: {train_file} written; stopping before training")
        return 0

    pairs = list(range(args.seeds))

    def runs_of(k: int) -> Path:  # a seed pair's trainer folders (one seed: work/runs, as before seeds)
        return work / "runs" if args.seeds == 1 else work / "seeds" / str(k) / "runs"

    def out_of(k: int) -> Path:  # a seed pair's result files (one seed: out itself)
        return out if args.seeds == 1 else out / "seeds" / str(k)

    snapshot.run_dirs = [(runs_of(k), out_of(k) / "runs") for k in pairs]
    trainers: dict[tuple[int, str], subprocess.Popen[bytes]] = {}
    every = [(k, arm) for k in pairs for arm in ARMS]
    # Training ends by the deadline less the evaluations' reserve. Every run then stops at the same step (a stop
    # file each, training.stop_file): the next step of the one ahead, which the others catch up to. Half the
    # reserve again is a hard wall-clock limit (training.max_seconds) in case one run is far behind.
    train_until = args.deadline - args.eval_reserve if args.deadline else 0.0
    if args.deadline:
        left = train_until - (time.perf_counter() - log.started)
        log(f"training: {args.steps} steps asked, {left:.0f} s left for them")
    for k, arm in every:
        out_of(k).mkdir(parents=True, exist_ok=True)
        config = arm_config(args, arm, start, train_file, index, runs_of(k) / arm, seed=args.seed + k)
        config.training.stop_file = str(runs_of(k) / f"{arm}.stop")
        if args.deadline:
            config.training.max_seconds = max(1.0, left + args.eval_reserve / 2)
        if not any((runs_of(k) / arm).glob("*.safetensors")):
            trainers[(k, arm)] = start_training(config, out_of(k))
            pair = f" seed {args.seed + k}" if args.seeds > 1 else ""
            log(f"training {arm}{pair} (λp = {ARMS[arm]}): pid {trainers[(k, arm)].pid}")
    evals = {
        "start": ensure_eval(
            "start", str(start), eval_rows, index, out, log, budgets=budgets, params={}, seed=args.seed
        )
    }
    stopping = False
    while any(p.poll() is None for p in trainers.values()):
        if args.deadline and not stopping and time.perf_counter() - log.started >= train_until:
            stop_at = max(steps_done(runs_of(k) / arm) for k, arm in every) + 1
            for k, arm in every:
                (runs_of(k) / f"{arm}.stop").write_text(f"{stop_at}\n", encoding="utf-8")
            log(f"training: time is up, every run stops at step {stop_at}")
            stopping = True
        time.sleep(2)
    for (k, arm), process in trainers.items():
        log(f"training {arm} (pair {k}): exit {process.returncode}, {steps_done(runs_of(k) / arm)} steps")
    for k in pairs:
        pair_evals = dict(evals) if args.seeds == 1 else {"start": evals["start"]}
        for arm in ARMS:
            if not any((runs_of(k) / arm).glob("*.safetensors")):
                log(f"training {arm} (pair {k}): no model saved; its evaluation is skipped")
                continue
            pair_evals[f"trained_{arm}"] = ensure_eval(
                f"trained_{arm}",
                str(runs_of(k) / arm),
                eval_rows,
                index,
                out_of(k),
                log,
                budgets=budgets,
                params={"lambda_p": ARMS[arm]},
                seed=args.seed + k,
            )
            result = table(pair_evals, args.seed + k)
            (out_of(k) / "table.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
            (out_of(k) / "table.md").write_text(markdown(result), encoding="utf-8")
            snapshot.take()
    if args.seeds > 1:
        pooled_tables(args, [out_of(k) for k in pairs], out, log)
        snapshot.take()
    log("done")
    print((out / "table.md").read_text(encoding="utf-8") if (out / "table.md").is_file() else "no table")
    return 0


def held_out_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The evaluation's questions: the split's held-out ones in its order, else the ``test`` split's."""
    rows = read_rows(args.questions)
    if args.split is None:
        return split_rows(rows, "test")
    by_id = {str(r["id"]): r for r in rows}
    return [by_id[qid] for qid in args.split_held_out]


def pooled_tables(args: argparse.Namespace, folders: list[Path], out: Path, log: Log) -> None:
    """``bench/experiment3_analysis.py`` over the seed pairs: ``out/experiment-3.json`` and ``experiment-3.md``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "experiment3_analysis", REPO / "bench" / "experiment3_analysis.py"
    )
    assert spec is not None and spec.loader is not None
    analysis = importlib.util.module_from_spec(spec)
    sys.modules["experiment3_analysis"] = analysis
    spec.loader.exec_module(analysis)
    done = [f for f in folders if all((f / f"eval_trained_{arm}.jsonl").is_file() for arm in ARMS)]
    if len(done) < len(folders):
        log(
            f"pooled tables: {len(folders) - len(done)} seed pairs lack an evaluation; pooled over {len(done)}"
        )
    if not done:
        return
    try:
        result = analysis.analyse(done, split=args.split, seed=args.seed)
    except analysis.AnalysisError as exc:
        log(f"pooled tables: {exc}")
        return
    (out / "experiment-3.json").write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    (out / "experiment-3.md").write_text(analysis.markdown(result), encoding="utf-8")
    log(f"pooled tables: {len(done)} seed pairs; {result['decision']['verdict']}")


def describe(
    args: argparse.Namespace, start: Path, index: Path, eval_rows: list[dict[str, Any]], out: Path
) -> None:
    """What the web app needs to show the run as an experiment (``manage.py experiment_import``): the arms and
    the settings beside each arm's own ``run_config.json``, the held-out questions, the index's metadata (its
    corpus checksum), and where it ran."""
    import torch

    from retrieval.index import METADATA_FILE

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    experiment = {
        "name": f"λp = 0 against λp = 0.4, up to {args.steps} steps, on {device}",
        "script": "bench/experiment_gpu.py",
        "arms": [{"name": arm, "method": "hiprag", "params": {"lambda_p": lp}} for arm, lp in ARMS.items()],
        "baseline": BASELINE,
        "start_model": str(start),
        "judge": "evidence",
        "seed": args.seed,
        "seeds": [args.seed + k for k in range(args.seeds)],
        "split": None if args.split is None else str(args.split),
        "steps": args.steps,
        "screen": {"samples": args.screen_samples, "min": args.screen_min, "max": args.screen_max},
        "train_limit": args.train_limit,
        "train_drop_guessable": not args.keep_guessable,
        "eval_limit": args.eval_limit,
        "smoke": args.smoke,
        "torch": torch.__version__,
        "device": device,
    }
    (out / "experiment.json").write_text(json.dumps(experiment, indent=1), encoding="utf-8")
    if not (out / "eval_questions.jsonl").is_file():
        write_rows(out / "eval_questions.jsonl", eval_rows)
    shutil.copy(index / METADATA_FILE, out / "index_metadata.json")


def start_model(
    args: argparse.Namespace, work: Path, index: Path, out: Path, log: Log, snapshot: Snapshot
) -> Path:
    """The model every arm starts from: a tiny random one (--smoke), the given folder, or the warm start of the
    base model (made here)."""
    if args.start_model:
        return Path(args.start_model).resolve()
    if args.smoke:
        from trainer.models import tiny_model, tiny_tokenizer

        base, start = work / "base-tiny", work / "start-tiny"
        if not (base / "config.json").is_file():
            tokenizer = tiny_tokenizer()
            tiny_model(tokenizer, seed=args.seed).save_pretrained(base)
            tokenizer.save_pretrained(base)
    else:
        base, start = work / "SmolLM2-135M-Instruct", work / "SmolLM2-135M-Instruct-warm-redundant"
        ensure_base_model(args.gguf.resolve(), base, log)
    snapshot.warm = start
    ensure_warm_start(base, index, args.questions.resolve(), start, out, log, smoke=args.smoke)
    snapshot.take()
    return start


def screen(
    args: argparse.Namespace,
    start: Path,
    index: Path,
    budgets: dict[str, Any],
    train_file: Path,
    out: Path,
    log: Log,
) -> bool:
    """Sample the start model on the unseen training questions and keep those it answered in the pass range
    (``webapp.experiments.screening.screened_rows``' rule, with no unscreened share); False when none is kept."""
    candidates = unseen_train_rows(
        args.questions,
        start,
        args.train_limit,
        args.seed,
        drop_guessable=not args.keep_guessable,
        pool=args.split_train if args.split is not None else None,
    )
    if not candidates:
        log(
            f"screen: every training question of {args.questions} is in the warm start's demonstrations; stopping"
        )
        return False
    # What the screen chose from: the training questions of the experiment experiment_import makes of the bundle.
    write_rows(out / "screen_questions.jsonl", candidates)
    counts = {str(r["id"]): 0 for r in candidates}
    for sample in range(1, args.screen_samples + 1):
        records = ensure_eval(
            f"screen_{sample}",
            str(start),
            candidates,
            index,
            out,
            log,
            budgets=budgets,
            params={},
            temperature=args.temperature,
            seed=args.seed + sample,
        )
        for r in records:
            counts[r["id"]] += int(r["cem"])
    kept = [
        {
            **r,
            "metadata": {
                **(r.get("metadata") or {}),
                "screen": {
                    "passes": counts[str(r["id"])],
                    "samples": args.screen_samples,
                    "kept": "screened",
                },
            },
        }
        for r in candidates
        if args.screen_min <= counts[str(r["id"])] <= args.screen_max
    ]
    passes = Counter(counts.values())
    screen_yield = {
        "candidates": len(candidates),
        "kept": len(kept),
        "yield": len(kept) / len(candidates),
        "samples": args.screen_samples,
        "kept_range": [args.screen_min, args.screen_max],
        "questions_by_passes": {str(n): passes[n] for n in sorted(passes)},
        "temperature": args.temperature,
        "start_model": str(start),
    }
    (out / "screen_yield.json").write_text(json.dumps(screen_yield, indent=1), encoding="utf-8")
    if not kept:
        log("screen: no question kept; stopping")
        return False
    write_rows(train_file, kept)
    log(
        f"screen: {len(kept)} of {len(candidates)} kept (passes {sorted(counts[str(r['id'])] for r in kept)})"
    )
    return True


if __name__ == "__main__":
    sys.exit(main())
