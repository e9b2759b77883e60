"""What the stage runner (``python -m trainer.jobs experiment``, :mod:`trainer.jobs`) is given for an experiment of
the web app: its inputs written into the experiment's folder and its command line.

The folder (:func:`webapp.experiments.inputs.experiment_dir`) holds ``runner/questions.jsonl`` (the training and
evaluation datasets' questions) and ``runner/split.json`` (their ids as ``train`` and ``held_out``), the tiny start
model when the spec asks for it (saved once, so every stage starts from the very same weights), the runner's work
folder (``work/``: trainers' outputs) and its experiment spool (``spool/``), which the app replays as it grows. The
index is the app's own folder (``--index``). Every setting of the spec reaches the runner: the arms, baseline and
seeds, each knob (a flag of its own, else ``--set PATH=JSON``), the screen, the judge as a whole spec, the
evaluations' batch and engine; ``resamples`` is the app's own (it computes the result from the replayed runs).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from trainer.config import TINY_MODEL
from trainer.jobs.plan_checks import FLAG_OF_FIELD
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.experiments.inputs import dataset_rows, experiment_dir
from webapp.experiments.models import Experiment
from webapp.experiments.specs import KNOBS, ExperimentConfigError, ExperimentSpec

START_MODEL_DIR = "start-model"
# The knobs (webapp.experiments.specs.KNOBS) the runner takes as flags of their own (its table); every other goes
# as --set.
KNOB_FLAGS = {path: flag for path, flag in FLAG_OF_FIELD.items() if "." in path}


@dataclass(frozen=True)
class RunnerLaunch:
    """An experiment's runner: its command (``python`` first) and where it writes."""

    argv: list[str]
    folder: Path  # the experiment's folder
    out: Path  # the experiment spool
    work: Path
    log: Path  # the runner's own output (stdout and stderr)


def start_model(experiment: Experiment, spec: ExperimentSpec) -> str:
    """The start model's folder. The tiny random model is saved once per experiment, so every method and every
    evaluation starts from the very same weights."""
    if spec.model != TINY_MODEL:
        return spec.model
    folder = experiment_dir(experiment.pk) / START_MODEL_DIR
    if not (folder / "config.json").is_file():
        from trainer.models import tiny_model, tiny_tokenizer

        tokenizer = tiny_tokenizer()
        partial = folder.with_name(folder.name + ".partial")
        tiny_model(tokenizer, seed=spec.seed).save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        partial.rename(folder)
    return str(folder)


def write_questions(folder: Path, spec: ExperimentSpec) -> tuple[Path, Path, int, int]:
    """``questions.jsonl`` (the training questions, then the evaluation's) and ``split.json``; the counts of each.
    A question in both is refused, named: a held-out question trained on would measure recall, not the method."""
    train = dataset_rows(Dataset.objects.get(pk=spec.train_dataset_id))
    held_out = dataset_rows(Dataset.objects.get(pk=spec.eval_dataset_id))
    train_ids = [str(r["id"]) for r in train]
    both = sorted(set(train_ids) & {str(r["id"]) for r in held_out})
    if both:
        raise ExperimentConfigError(
            "eval_questions",
            f"{len(both)} questions are also training questions, e.g. {both[0]!r}; choose held-out questions",
        )
    folder.mkdir(parents=True, exist_ok=True)
    questions, split = folder / "questions.jsonl", folder / "split.json"
    with questions.open("w", encoding="utf-8") as handle:
        for row in (*train, *held_out):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    split.write_text(
        json.dumps({"train": train_ids, "held_out": [str(r["id"]) for r in held_out]}), encoding="utf-8"
    )
    return questions, split, len(train), len(held_out)


def index_folder(spec: ExperimentSpec) -> Path:
    """The index's folder, which the runner uses as it is (``--index``)."""
    from retrieval.index import METADATA_FILE

    index = Index.objects.get(pk=spec.index_id)
    folder = Path(index.path or "")
    if not index.path or not (folder / METADATA_FILE).is_file():
        raise ExperimentConfigError("index", f"index {index} has no built folder ({folder / METADATA_FILE})")
    return folder


def knob_flags(spec: ExperimentSpec) -> list[str]:
    """Every knob's value: its flag, or ``--set PATH=JSON`` (a knob left unset takes the trainer's default, as the
    app's own config does)."""
    flags: list[str] = []
    for path in KNOBS:
        value = spec.knob(path)
        if value is None:
            continue
        if path in KNOB_FLAGS:
            flags += [KNOB_FLAGS[path], str(value)]
        else:
            flags += ["--set", f"{path}={json.dumps(value)}"]
    return flags


def spec_flags(spec: ExperimentSpec, train_count: int, eval_count: int) -> list[str]:
    """The arms, baseline, seeds, knobs, screen, judge and evaluation settings as the runner's flags."""
    flags: list[str] = []
    for arm in spec.ordered_arms():
        weights = ",".join(f"{k}={v}" for k, v in arm.params.items())
        flags += ["--arm", f"{arm.name}={arm.method}" + (f":{weights}" if weights else "")]
    flags += ["--baseline", spec.baseline, "--seeds", str(spec.seeds), "--algorithm", spec.algorithm]
    flags += knob_flags(spec)
    low, high = spec.screen_range if spec.screen_samples else (0, 0)
    flags += [
        "--screen-samples",
        str(spec.screen_samples),
        "--screen-min",
        str(low),
        "--screen-max",
        str(high),
    ]
    flags += ["--screen-unscreened-share", str(spec.screen_unscreened_share)]
    # The app chose the training questions (its split, limit, guessable ones left out or not): all are candidates.
    flags += ["--train-limit", str(train_count), "--keep-guessable", "--eval-limit", str(eval_count)]
    flags += ["--judge-spec", json.dumps(asdict(spec.judge))]
    flags += ["--eval-batch-size", str(spec.eval_batch_size), "--eval-engine", spec.eval_engine]
    concurrent = int(getattr(settings, "EXPERIMENT_CONCURRENT_TRAINERS", 1))
    return [*flags, "--concurrent", str(concurrent)]


def runner_launch(experiment: Experiment, spec: ExperimentSpec, *, python: str = "") -> RunnerLaunch:
    """The experiment's inputs written, and its runner's command (``python``: this interpreter by default)."""
    folder = experiment_dir(experiment.pk)
    index = index_folder(spec)
    questions, split, train_count, eval_count = write_questions(folder / "runner", spec)
    model = start_model(experiment, spec)
    out, work = folder / "spool", folder / "work"
    argv = [
        python or sys.executable,
        "-m",
        "trainer.jobs",
        "experiment",
        "--work",
        str(work),
        "--out",
        str(out),
    ]
    argv += ["--name", experiment.name, "--questions", str(questions), "--split", str(split)]
    argv += ["--index", str(index), "--start-model", model]
    argv += spec_flags(spec, train_count, eval_count)
    return RunnerLaunch(argv=argv, folder=folder, out=out, work=work, log=folder / "runner.log")


def runner_parse(argv: list[str]) -> Any:
    """The runner's own reading of the command (its plan, checked as the runner checks it): for tests and for a
    check before anything is launched."""
    from trainer.jobs.plan import parser, plan_from_args

    return plan_from_args(parser().parse_args(argv[4:]))
