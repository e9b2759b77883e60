"""The bundle bench/experiment_gpu.py wrote before the experiment spool (docs/experiments/ keeps one: experiment #2 as
it ran on an H100), rewritten as an experiment spool so that it replays through the one path
(:mod:`webapp.experiments.spool_replay`).

The bundle's top folder holds ``experiment.json`` (arms, baseline, one seed, start model, judge, screen),
``screen_questions.jsonl`` / ``train_questions.jsonl`` / ``eval_questions.jsonl``, ``index_metadata.json``,
``log.txt``, ``runs/<arm>/`` (the trainer's run_config.json, metrics.jsonl, samples.jsonl, progress.json, with
``train_<arm>.log`` beside) and ``eval_screen_<n>.jsonl``, ``eval_start.jsonl``, ``eval_trained_<arm>.jsonl``
(records in the spool's own shape). An arm's training counts as finished when its trained model was evaluated.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from trainer import spool as run_spool
from trainer.jobs.spool import evaluation_manifest
from trainer.report_client import OutputTailer
from webapp.common.importing import DataImportError
from webapp.experiments.spool_reading import FORMAT, MANIFEST

DESCRIPTION = "experiment.json"  # what tells a bundle from a spool (which has manifest.json)
QUESTIONS = {
    "screen_questions.jsonl": "candidates.jsonl",
    "train_questions.jsonl": "train.jsonl",
    "eval_questions.jsonl": "eval.jsonl",
}


def is_legacy_bundle(folder: Path) -> bool:
    return (folder / DESCRIPTION).is_file() and not (folder / MANIFEST).is_file()


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False) + "\n", encoding="utf-8")


def _mtime(path: Path) -> str:
    return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _described(bundle: Path, shown: str) -> dict[str, Any]:
    try:
        return run_spool.read_json_object(bundle / DESCRIPTION, f"{shown}/{DESCRIPTION}")
    except run_spool.SpoolFileError as exc:
        raise DataImportError(file=exc.file, line=exc.line, field=None, message=exc.message) from None


def _spool_id(bundle: Path) -> str:
    """The same bundle is the same spool (a second replay finds the experiment of the first)."""
    digest = hashlib.sha256()
    for name in (DESCRIPTION, "index_metadata.json", "log.txt"):
        if (bundle / name).is_file():
            digest.update((bundle / name).read_bytes())
    return "bundle-" + digest.hexdigest()[:32]


def _evaluation(
    target: Path, source: Path, *, role: str, method: str, arm: str, seed: int | None, sample: int, model: str
) -> None:
    folder = (
        target
        / "stages"
        / (
            f"screen-{sample}"
            if role == "screen"
            else f"start-{method}"
            if role == "start_eval"
            else f"eval-{arm}-s{seed}"
        )
    )
    folder.mkdir(parents=True)
    shutil.copyfile(source, folder / "records.jsonl")
    with source.open("rb") as handle:
        questions = sum(1 for line in handle if line.strip())
    manifest = {
        **evaluation_manifest(
            role=role,
            method=method,
            model=model,
            temperature=0.0,
            questions=questions,
            arm=arm,
            seed=seed,
            sample=sample,
        ),
        "started_at": None,
        "finished_at": _mtime(source),
        "status": "finished",
    }
    _write_json(folder / MANIFEST, manifest)


def _training(target: Path, bundle: Path, shown: str, arm: dict[str, Any], seed: int, spool_id: str) -> str:
    """``runs/<arm>/`` as a run spool whose one batch is what the trainer's output folder holds; returns the folder
    the trainer saved its model in (its config's output_dir)."""
    name = arm["name"]
    source = bundle / "runs" / name
    try:
        config = run_spool.read_json_object(
            source / "run_config.json", f"{shown}/runs/{name}/run_config.json"
        )
    except run_spool.SpoolFileError as exc:
        raise DataImportError(file=exc.file, line=exc.line, field=None, message=exc.message) from None
    trained = (bundle / f"eval_trained_{name}.jsonl").is_file()
    log = bundle / f"train_{name}.log"
    try:
        batch = OutputTailer(source, log_path=log if log.is_file() else None).read()
    except (ValueError, UnicodeDecodeError) as exc:
        raise DataImportError(
            file=f"{shown}/runs/{name}", line=None, field=None, message=f"unreadable trainer output: {exc}"
        ) from None
    if trained:
        batch["final"] = "finished"
    folder = target / "stages" / f"train-{name}-s{seed}"
    model: dict[str, Any] = config["model"] if isinstance(config.get("model"), dict) else {}
    ended = _mtime(source / "progress.json") if (source / "progress.json").is_file() else None
    manifest = {
        "format": run_spool.FORMAT,
        "version": run_spool.VERSION,
        "id": f"{spool_id}-train-{name}",
        "name": f"train · {name} · seed {seed}",
        "method": str(config.get("method") or arm.get("method") or "hiprag"),
        "algorithm": str(config.get("algorithm") or "grpo"),
        "model_name": str(model.get("path") or "?"),
        "config": config,
        "command": [],
        "host": "",
        "started_at": None,
        "finished_at": ended if trained else None,
        "exit_code": 0 if trained else None,
    }
    _write_json(folder / MANIFEST, manifest)
    (folder / "000000000001.json").write_text(json.dumps(batch, ensure_ascii=False), encoding="utf-8")
    return str(config.get("output_dir") or "")


def _copy_inputs(bundle: Path, out: Path) -> None:
    for name in ("log.txt", "index_metadata.json"):
        if (bundle / name).is_file():
            shutil.copyfile(bundle / name, out / name)
    for old, new in QUESTIONS.items():
        if (bundle / old).is_file():
            (out / "questions").mkdir(exist_ok=True)
            shutil.copyfile(bundle / old, out / "questions" / new)


def _start_stages(bundle: Path, out: Path, method: str, start: str) -> None:
    """The screen's samples and the start model's evaluation (in the baseline's method: the bundle has one)."""
    for path in sorted(bundle.glob("eval_screen_*.jsonl")):
        sample = path.stem.rsplit("_", 1)[-1]
        if sample.isdigit():
            _evaluation(
                out, path, role="screen", method=method, arm="", seed=None, sample=int(sample), model=start
            )
    path = bundle / "eval_start.jsonl"
    if path.is_file():
        _evaluation(out, path, role="start_eval", method=method, arm="", seed=None, sample=0, model=start)


def _arm_stages(
    bundle: Path, out: Path, shown: str, arms: list[dict[str, Any]], seed: int, spool_id: str
) -> bool:
    """Each arm's training and the evaluation of its model; whether every arm's model was evaluated."""
    complete = True
    for arm in arms:
        name, model = arm["name"], ""
        if (bundle / "runs" / name / "run_config.json").is_file():
            model = _training(out, bundle, shown, arm, seed, spool_id)
        path = bundle / f"eval_trained_{name}.jsonl"
        if path.is_file():
            method = str(arm.get("method"))
            _evaluation(out, path, role="eval", method=method, arm=name, seed=seed, sample=0, model=model)
        complete = complete and path.is_file()
    return complete


def bundle_to_spool(bundle: Path, target: Path, shown: str = "") -> Path:
    """Write the experiment spool of the bundle in ``bundle`` (its top folder) to ``target/<its name>``; returns
    that folder. ``shown`` names the bundle in errors."""
    shown = shown or str(bundle)
    described = _described(bundle, shown)
    out = target / bundle.name
    out.mkdir(parents=True)
    spool_id = _spool_id(bundle)
    seed: int = described["seed"] if isinstance(described.get("seed"), int) else 0
    arms = [a for a in described.get("arms") or [] if isinstance(a, dict) and isinstance(a.get("name"), str)]
    baseline = str(described.get("baseline") or "")
    start = str(described.get("start_model") or "")
    _copy_inputs(bundle, out)
    _start_stages(bundle, out, next((str(a.get("method")) for a in arms if a["name"] == baseline), ""), start)
    complete = _arm_stages(bundle, out, shown, arms, seed, spool_id)
    manifest = {
        "format": FORMAT,
        "version": 1,
        "id": spool_id,
        "name": str(described.get("name") or "experiment"),
        "arms": arms,
        "baseline": baseline,
        "seeds": [seed],
        "start_model": start,
        "judge": str(described.get("judge") or "evidence"),
        "screen": described.get("screen") or {"samples": 0},
        "split": None,
        "steps": described.get("steps"),
        "host": "",
        "torch": str(described.get("torch") or ""),
        "device": str(described.get("device") or ""),
        "started_at": None,
        "finished_at": None,
        "status": "finished" if complete else "failed",
        "error": "",
        "phases": {},
    }
    _write_json(out / MANIFEST, manifest)
    return out
