"""Reading an experiment spool (the runner's format: ``python -m trainer.jobs experiment --out DIR``) for
:mod:`webapp.experiments.spool_replay`: its manifest checked, the experiment's spec made of it (the first training
stage's trainer config giving the knobs), its datasets and local index, and its stage folders by stage. Every error
names the spool, the file, the line where there is one and the field."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer import spool as run_spool
from trainer.config import get_path
from webapp.common.importing import DataImportError, iter_jsonl
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.experiments.inputs import experiment_dataset, index_for_folder
from webapp.experiments.models import ExperimentRun
from webapp.experiments.specs import (
    KNOBS,
    Arm,
    ExperimentConfigError,
    ExperimentSpec,
    JudgeChoice,
    experiment_spec_check,
)
from webapp.experiments.stage_links import Stage

FORMAT = "searchlab-experiment-spool"
EVALUATION_FORMAT = "searchlab-evaluation-spool"
MANIFEST = "manifest.json"
ROLE = ExperimentRun.Role


@dataclass(frozen=True, slots=True)
class ExperimentSpool:
    """A spool folder; ``shown`` names it in errors (``results.tar.gz:out``, or the folder's path)."""

    root: Path
    shown: str

    def where(self, name: str) -> str:
        return f"{self.shown}/{name}"

    def error(
        self, name: str, message: str, *, line: int | None = None, field: str | None = None
    ) -> DataImportError:
        return DataImportError(file=self.where(name), line=line, field=field, message=message)

    def json(self, name: str) -> dict[str, Any]:
        if not (self.root / name).is_file():
            raise self.error(name, "missing from the spool")
        try:
            return run_spool.read_json_object(self.root / name, self.where(name))
        except run_spool.SpoolFileError as exc:
            raise DataImportError(file=exc.file, line=exc.line, field=None, message=exc.message) from None

    def rows(self, name: str) -> list[dict[str, Any]]:
        if not (self.root / name).is_file():
            raise self.error(name, "missing from the spool")
        rows = [row for _, row in iter_jsonl(self.root / name, name=self.where(name))]
        if not rows:
            raise self.error(name, "holds no question")
        return rows


# --- reading ---------------------------------------------------------------------------------------------------


def _text(spool: ExperimentSpool, manifest: dict[str, Any], name: str) -> str:
    value = manifest.get(name)
    if not isinstance(value, str) or not value.strip():
        raise spool.error(MANIFEST, "must be a non-empty string", field=name)
    return value.strip()


def read_manifest(spool: ExperimentSpool) -> dict[str, Any]:
    """The experiment manifest, checked where the replay depends on it (format, id, arms, baseline, seeds)."""
    manifest = spool.json(MANIFEST)
    if manifest.get("format") != FORMAT:
        raise spool.error(MANIFEST, f"must be {FORMAT!r}", field="format")
    _text(spool, manifest, "id")
    _text(spool, manifest, "baseline")
    seeds = manifest.get("seeds")
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise spool.error(MANIFEST, "expected a non-empty list of integers", field="seeds")
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise spool.error(MANIFEST, "seed k is the first seed + k: expected consecutive seeds", field="seeds")
    return manifest


def _arms(spool: ExperimentSpool, manifest: dict[str, Any]) -> tuple[Arm, ...]:
    raw = manifest.get("arms")
    if not isinstance(raw, list) or not raw:
        raise spool.error(MANIFEST, "expected a list of arms", field="arms")
    arms = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise spool.error(MANIFEST, "expected {name, method, params}", field=f"arms[{i}]")
        params = item.get("params") or {}
        if not isinstance(params, dict):
            raise spool.error(MANIFEST, "expected an object", field=f"arms[{i}].params")
        arms.append(Arm(name=item["name"], method=str(item.get("method", "")), params=params))
    return tuple(arms)


def _knobs(config: dict[str, Any]) -> dict[str, Any]:
    """The experiment's knobs as a trainer ran them (its config), in ExperimentSpec.run's shape."""
    run: dict[str, Any] = {}
    for path in KNOBS:
        value = get_path(config, path)
        if value is None:
            continue
        head, _, leaf = path.rpartition(".")
        node = run
        for part in head.split(".") if head else ():
            node = node.setdefault(part, {})
        node[leaf] = value
    return run


def _first_train_config(spool: ExperimentSpool, arms: tuple[Arm, ...], seed: int) -> dict[str, Any]:
    """The trainer config of the first training stage that started (its run spool's manifest ``config``)."""
    for arm in arms:
        name = f"stages/train-{arm.name}-s{seed}/{MANIFEST}"
        if (spool.root / name).is_file():
            config = spool.json(name).get("config")
            if not isinstance(config, dict):
                raise spool.error(name, "must be a JSON object", field="config")
            return config
    return {}


def spool_spec(spool: ExperimentSpool, manifest: dict[str, Any], index: Index) -> ExperimentSpec:
    arms = _arms(spool, manifest)
    seeds: list[int] = manifest["seeds"]
    ordered = sorted(arms, key=lambda arm: arm.name != manifest["baseline"])
    run = _knobs(_first_train_config(spool, tuple(ordered), seeds[0]))
    run.setdefault("training", {})["seed"] = seeds[0]
    if isinstance(manifest.get("steps"), int):
        run["training"].setdefault("max_steps", manifest["steps"])
    screen = manifest.get("screen") or {}
    if not isinstance(screen, dict):
        raise spool.error(MANIFEST, "expected an object", field="screen")
    for key in ("samples", "min", "max"):
        if not isinstance(screen.get(key, 0), int):
            raise spool.error(MANIFEST, "expected an integer", field=f"screen.{key}")
    # The questions the screen chose from (what the web app's experiment calls its training questions), else the
    # ones trained on; those are the training runs' dataset (_train_dataset).
    chosen = "questions/candidates.jsonl" if (spool.root / "questions/candidates.jsonl").is_file() else None
    values: dict[str, Any] = {
        "arms": arms,
        "baseline": manifest["baseline"],
        "model": str(manifest.get("start_model", "")),
        "train_dataset_id": spool_dataset(spool, chosen or "questions/train.jsonl", "train").pk,
        "eval_dataset_id": spool_dataset(spool, "questions/eval.jsonl", "eval").pk,
        "index_id": index.pk,
        "judge": JudgeChoice(kind=str(manifest.get("judge") or "evidence")),
        "run": run,
        # The screen ran there (the training questions are what it kept); its samples come in as screen stages.
        "screen_samples": int(screen.get("samples", 0)),
        "screen_min_passes": int(screen.get("min", 1)),
        "screen_max_passes": int(screen.get("max", -1)),
        "seeds": len(seeds),  # seed pairs: seed k = training.seed + k, as the runner's
    }
    spec = ExperimentSpec(**values)
    try:
        experiment_spec_check(spec)
    except ExperimentConfigError as exc:
        raise spool.error(MANIFEST, exc.message, field=exc.field) from None
    return spec


def spool_dataset(spool: ExperimentSpool, name: str, label: str) -> Dataset:
    try:
        return experiment_dataset(rows=spool.rows(name), label=label)
    except ExperimentConfigError as exc:
        raise spool.error(name, exc.message) from None


def spool_index(spool: ExperimentSpool, index_folder: str | Path | None, known: int | None) -> Index:
    """The local index: the folder given, else the one a first replay used, else the ready index of the spool's
    corpus. Its corpus must be the spool's (the same checksum), or the answers could not be read back."""
    theirs = spool.json("index_metadata.json").get("corpus_sha256")
    if index_folder:
        try:
            index = index_for_folder(index_folder)
        except ExperimentConfigError as exc:
            raise DataImportError(
                file=str(index_folder), line=None, field="index", message=exc.message
            ) from None
    else:
        found = Index.objects.filter(pk=known).first() if known else None
        if found is None and theirs:
            found = (
                Index.objects.filter(status=Index.Status.READY, metadata__corpus_sha256=theirs)
                .order_by("-pk")
                .first()
            )
        if found is None:
            raise spool.error(
                "index_metadata.json",
                "no ready index of this corpus here: build one, or name one (--index, the Imports page's index)",
                field="corpus_sha256",
            )
        index = found
    ours = (index.metadata or {}).get("corpus_sha256")
    if theirs and ours and theirs != ours:
        raise spool.error(
            "index_metadata.json",
            f"the spool's corpus (sha256 {theirs[:12]}…) is not the corpus of index {index.path} "
            f"({ours[:12]}…): give --index an index of the same corpus",
            field="corpus_sha256",
        )
    return index


def spool_time(spool: ExperimentSpool, name: str, values: dict[str, Any], key: str) -> dt.datetime | None:
    value = values.get(key)
    if value is None:
        return None
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise spool.error(name, f"not a time: {value!r}", field=key) from None


# --- stages ----------------------------------------------------------------------------------------------------


def stage_key(stage: Stage) -> str:
    """The stage's folder under ``stages/`` (the spool format's keys)."""
    if stage.role == ROLE.SCREEN:
        return f"screen-{stage.arm.rsplit('-', 1)[-1]}"
    if stage.role == ROLE.START_EVAL:
        return f"start-{stage.method}"
    return f"{'train' if stage.role == ROLE.TRAIN else 'eval'}-{stage.arm}-s{stage.seed}"


def finished_stage(spool: ExperimentSpool, stage: Stage, key: str) -> dict[str, Any] | None:
    """The stage's manifest when the stage finished, else None."""
    name = f"stages/{key}/{MANIFEST}"
    if not (spool.root / name).is_file():
        return None
    manifest = spool.json(name)
    if stage.role == ROLE.TRAIN:  # a run spool: finished when its trainer exited 0
        done = manifest.get("finished_at") is not None and manifest.get("exit_code") == 0
        return manifest if done else None
    if manifest.get("format") != EVALUATION_FORMAT:
        raise spool.error(name, f"must be {EVALUATION_FORMAT!r}", field="format")
    if manifest.get("status") != "finished" or not (spool.root / f"stages/{key}/records.jsonl").is_file():
        return None
    return manifest


def stage_failure(spool: ExperimentSpool, stage: Stage, key: str) -> str:
    """Why a stage folder that is there did not finish, when its manifest says (its trainer's exit code, its
    error); empty otherwise (absent, or still running)."""
    path = spool.root / "stages" / key / MANIFEST
    if not path.is_file():
        return ""
    manifest = spool.json(f"stages/{key}/{MANIFEST}")
    if stage.role == ROLE.TRAIN:
        code = manifest.get("exit_code")
        return f"its trainer exited with {code}" if isinstance(code, int) and code != 0 else ""
    return (
        f"failed: {manifest.get('error') or 'no reason given'}" if manifest.get("status") == "failed" else ""
    )


def import_lines(spool: ExperimentSpool, name: str, arm: Arm, dataset: Dataset, target: Path) -> Path:
    """The records as the trajectories import reads them (a line per line, so its errors name the same line): the
    response, its format, the step verdicts, and the arm's method and weights to score it with."""
    with target.open("w", encoding="utf-8") as out:
        for number, record in iter_jsonl(spool.root / name, name=spool.where(name)):
            for key in ("id", "text", "format", "verdicts"):
                if key not in record:
                    raise spool.error(name, "missing", line=number, field=key)
            line = {
                "question_id": str(record["id"]),
                "dataset": dataset.name,
                "response": record["text"],
                "format": record["format"],
                "verdicts": record["verdicts"],
                "method": arm.method,
                "params": dict(arm.params),
            }
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    return target
