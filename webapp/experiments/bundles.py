"""An experiment run elsewhere, brought in from its bundle: ``bench/experiment_gpu.py`` runs experiment #2's stages
on a leased GPU machine without the web app and returns one ``.tar.gz`` of small files; this makes of it the same
experiment, stages and runs a ``manage.py experiment`` would have stored, so the experiment page, the compare page
(question by question, with the arms' training curves), the runs' pages and audits read it like any other.

What the bundle holds (``--out`` of the script; every path below is under its one top folder):

- ``experiment.json``: the arms (name, method, reward weights), the baseline, the start model's path there, the
  seed, the screen's settings;
- ``train_questions.jsonl`` (the screened training questions) and ``eval_questions.jsonl`` (the held-out ones);
- ``index_metadata.json``: the index's metadata, whose corpus checksum must be the local index's;
- ``runs/<arm>/``: each arm's trainer config (``run_config.json``), ``metrics.jsonl``, ``samples.jsonl`` and
  ``progress.json``, as a trainer writes them (stored by the training ingest's own ``store_batch``), and
  ``train_<arm>.log``;
- ``eval_screen_<n>.jsonl``, ``eval_start.jsonl`` and ``eval_trained_<arm>.jsonl``: one line per question with the
  response in HiPRAG's format and each step's judge outcome, stored through the trajectories import (parsed and
  scored by ``scoring``, as an imported file is), then the run's report computed from them;
- ``log.txt``: the script's log, kept as the experiment's.

A stage the bundle lacks (a run cut short by the machine's time limit) is left out: the experiment is stored
failed, naming what is missing, and cannot be resumed here (its models stayed on the other machine). Nothing is
stored when any file is malformed: the error names the bundle, the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from trainer.config import get_path
from trainer.report_client import OutputTailer
from webapp.common.importing import DataImportError, iter_jsonl
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.evaluation.services import evaluation_report_ensure
from webapp.experiments.inputs import experiment_dataset, experiments_dir, index_for_folder
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.services import Stage, experiment_stages, stage_attach
from webapp.experiments.specs import (
    IMPORTED_FROM,
    KNOBS,
    Arm,
    ExperimentConfigError,
    ExperimentSpec,
    JudgeChoice,
    experiment_spec_check,
)
from webapp.experiments.stage_specs import evaluation_spec
from webapp.runs.models import Run
from webapp.runs.services import run_create
from webapp.trajectories.services import trajectory_import

LOG_TAIL_LINES = 200


@dataclass(frozen=True, slots=True)
class Bundle:
    """An unpacked bundle: ``root`` is its top folder; ``label`` names it in errors."""

    root: Path
    label: str
    unpacked_now: bool = False  # this import unpacked it (so a failed import removes it again)

    def where(self, name: str) -> str:
        return f"{self.label}:{self.root.name}/{name}"

    def error(
        self, name: str, message: str, *, line: int | None = None, field: str | None = None
    ) -> DataImportError:
        return DataImportError(file=self.where(name), line=line, field=field, message=message)

    def json(self, name: str) -> dict[str, Any]:
        path = self.root / name
        if not path.is_file():
            raise self.error(name, "missing from the bundle")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self.error(name, f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise self.error(name, "expected a JSON object")
        return data

    def rows(self, name: str) -> list[dict[str, Any]]:
        path = self.root / name
        if not path.is_file():
            raise self.error(name, "missing from the bundle")
        return [row for _, row in iter_jsonl(path, name=self.where(name))]


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _check_unpacked_size(archive: tarfile.TarFile, label: str) -> None:
    """Refuse, before writing anything, a bundle that would unpack beyond ``UPLOAD_MAX_UNPACKED_BYTES`` or
    ``UPLOAD_MAX_UNPACKED_FILES`` (a member's size is its header's: extraction writes exactly that many bytes)."""
    max_bytes, max_files = settings.UPLOAD_MAX_UNPACKED_BYTES, settings.UPLOAD_MAX_UNPACKED_FILES
    total = 0
    for files, member in enumerate(archive, start=1):
        total += member.size if member.isfile() else 0
        if total > max_bytes:
            raise DataImportError(
                file=label,
                line=None,
                field=None,
                message=f"unpacks to more than {max_bytes:,} bytes (UPLOAD_MAX_UNPACKED_BYTES); refused",
            )
        if files > max_files:
            raise DataImportError(
                file=label,
                line=None,
                field=None,
                message=f"holds more than {max_files:,} members (UPLOAD_MAX_UNPACKED_FILES); refused",
            )


def unpack(path: Path, label: str = "") -> Bundle:
    """The bundle unpacked once under ``VAR_DIR/experiments/imports/<its sha256>`` (the same bundle twice is
    unpacked once); members that would land outside it, links and devices are refused (tarfile's "data" filter),
    and so is a bundle that would unpack beyond ``UPLOAD_MAX_UNPACKED_BYTES`` / ``UPLOAD_MAX_UNPACKED_FILES``.
    Nothing of an unpacking that failed is left on disk."""
    shown = label or str(path)
    if not path.is_file():
        raise DataImportError(file=shown, line=None, field=None, message="no such file")
    target = experiments_dir() / "imports" / _digest(path)
    fresh = not target.is_dir()
    if fresh:
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)  # what an interrupted unpacking left
        partial.mkdir(parents=True)
        try:
            with tarfile.open(path, "r:*") as archive:
                _check_unpacked_size(archive, shown)
                archive.extractall(partial, filter="data")
        except (tarfile.TarError, OSError, EOFError) as exc:
            shutil.rmtree(partial, ignore_errors=True)
            raise DataImportError(
                file=shown, line=None, field=None, message=f"not a readable .tar.gz: {exc}"
            ) from None
        except DataImportError:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        partial.rename(target)
    tops = [child for child in target.iterdir() if child.is_dir()]
    if len(tops) != 1:
        if fresh:
            shutil.rmtree(target, ignore_errors=True)
        raise DataImportError(
            file=shown,
            line=None,
            field=None,
            message=f"expected one top folder (bench/experiment_gpu.py's --out), found {len(tops)}",
        )
    return Bundle(root=tops[0], label=label or path.name, unpacked_now=fresh)


# --- reading ---------------------------------------------------------------------------------------------------


def _arms(bundle: Bundle, described: dict[str, Any]) -> tuple[Arm, ...]:
    raw = described.get("arms")
    if not isinstance(raw, list) or not raw:
        raise bundle.error("experiment.json", "expected a list of arms", field="arms")
    arms = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise bundle.error("experiment.json", "expected {name, method, params}", field=f"arms[{i}]")
        params = item.get("params") or {}
        if not isinstance(params, dict):
            raise bundle.error("experiment.json", "expected an object", field=f"arms[{i}].params")
        arms.append(Arm(name=item["name"], method=str(item.get("method", "")), params=params))
    return tuple(arms)


def _knobs(bundle: Bundle, arm: Arm) -> dict[str, Any]:
    """The experiment's knobs as the arm's trainer ran them (its run_config.json), in ExperimentSpec.run's shape."""
    name = f"runs/{arm.name}/run_config.json"
    config = bundle.json(name)
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


def _check_index(bundle: Bundle, index: Index) -> None:
    """The bundle's corpus must be the local index's: the same checksum, or the answers could not be read back."""
    theirs = bundle.json("index_metadata.json").get("corpus_sha256")
    ours = (index.metadata or {}).get("corpus_sha256")
    if theirs and ours and theirs != ours:
        raise bundle.error(
            "index_metadata.json",
            f"the bundle's corpus (sha256 {theirs[:12]}…) is not the corpus of index {index.path} "
            f"({ours[:12]}…): give --index an index of the same corpus",
            field="corpus_sha256",
        )


def _spec(bundle: Bundle, described: dict[str, Any], index: Index) -> ExperimentSpec:
    arms = _arms(bundle, described)
    baseline = described.get("baseline")
    if not isinstance(baseline, str):
        raise bundle.error("experiment.json", "expected the baseline arm's name", field="baseline")
    trained = [arm for arm in arms if (bundle.root / "runs" / arm.name / "run_config.json").is_file()]
    run = _knobs(bundle, trained[0]) if trained else {}
    if "seed" in described:
        run.setdefault("training", {})["seed"] = described["seed"]
    screen = described.get("screen") or {}
    # The questions the screen chose from (what the web app's experiment calls its training questions), else the
    # ones kept; the kept ones are the training runs' dataset (_train_dataset).
    chosen = (
        "screen_questions.jsonl"
        if (bundle.root / "screen_questions.jsonl").is_file()
        else "train_questions.jsonl"
    )
    train_rows = bundle.rows(chosen)
    eval_rows = bundle.rows("eval_questions.jsonl")
    for name, rows in ((chosen, train_rows), ("eval_questions.jsonl", eval_rows)):
        if not rows:
            raise bundle.error(name, "holds no question")
    spec = ExperimentSpec(
        arms=arms,
        baseline=baseline,
        model=str(described.get("start_model", "")),
        train_dataset_id=experiment_dataset(rows=train_rows, label="train").pk,
        eval_dataset_id=experiment_dataset(rows=eval_rows, label="eval").pk,
        index_id=index.pk,
        judge=JudgeChoice(kind=str(described.get("judge", "evidence"))),
        run=run,
        # The screen ran there (the training questions are what it kept); its samples come in as screen stages.
        screen_samples=int(screen.get("samples", 0)),
        screen_min_passes=int(screen.get("min", 1)),
        screen_max_passes=int(screen.get("max", -1)),
    )
    try:
        experiment_spec_check(spec)
    except ExperimentConfigError as exc:
        raise bundle.error("experiment.json", exc.message, field=exc.field) from None
    return spec


def _import_lines(bundle: Bundle, name: str, arm: Arm, dataset: Dataset) -> Path:
    """The evaluation file as the trajectories import reads it (a line per line, so its errors name the same
    line): the response, HiPRAG's format, the step verdicts, and the arm's method and weights to score it with."""
    source = bundle.root / name
    target = source.with_name(source.stem + ".import.jsonl")
    with target.open("w", encoding="utf-8") as out:
        for number, record in iter_jsonl(source, name=bundle.where(name)):
            for field in ("id", "text", "format", "verdicts"):
                if field not in record:
                    raise bundle.error(name, "missing", line=number, field=field)
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


# --- storing ---------------------------------------------------------------------------------------------------


def _eval_run(
    bundle: Bundle,
    experiment: Experiment,
    spec: ExperimentSpec,
    stage: Stage,
    name: str,
    model: str,
    base_run_id: int | None,
    user: AbstractBaseUser | None,
) -> Run:
    sample = int(stage.arm.rsplit("-", 1)[-1]) if stage.role == ExperimentRun.Role.SCREEN else 0
    arm = spec.arm(stage.arm) if stage.role == ExperimentRun.Role.EVAL else Arm(stage.method, stage.method)
    evaluation = evaluation_spec(spec, arm, model, sample)
    dataset = Dataset.objects.get(pk=evaluation.dataset_ids[0])
    label = (
        f"screen {sample}"
        if sample
        else "start"
        if stage.role == ExperimentRun.Role.START_EVAL
        else "trained"
    )
    run = run_create(
        name=f"exp{experiment.pk} {label} · {arm.name}",
        method=arm.method,
        model_name=model,
        kind=Run.Kind.EVAL,
        dataset_id=dataset.pk,
        config={**evaluation.to_json(), IMPORTED_FROM: bundle.where(name)},
        created_by=user,
        base_run_id=base_run_id,
    )
    Run.objects.filter(pk=run.pk).update(
        index_id=spec.index_id,
        judge_settings=asdict(
            evaluation.judge
        ),  # as evaluation_run_create stores it: the key's variable name only
        status=Run.Status.FINISHED,
        started_at=experiment.started_at,
        finished_at=experiment.finished_at,
    )
    trajectory_import(
        path=_import_lines(bundle, name, arm, dataset),
        run_id=run.pk,
        dataset_name=dataset.name,
        display_name=bundle.where(name),
    )
    evaluation_report_ensure(run_id=run.pk)
    return run


def _train_run(
    bundle: Bundle, experiment: Experiment, spec: ExperimentSpec, arm: Arm, user: AbstractBaseUser | None
) -> Run:
    from webapp.training.ingest import store_batch

    config = bundle.json(f"runs/{arm.name}/run_config.json")
    folder = bundle.root / "runs" / arm.name
    trained = (bundle.root / f"eval_trained_{arm.name}.jsonl").is_file()
    run = run_create(
        name=f"exp{experiment.pk} train · {arm.name}",
        method=arm.method,
        model_name=str(get_path(config, "model.path") or spec.model),
        kind=Run.Kind.TRAIN,
        algorithm=str(config.get("algorithm", spec.algorithm)),
        dataset_id=_train_dataset(bundle).pk,
        config={**config, IMPORTED_FROM: bundle.where(f"runs/{arm.name}")},
        created_by=user,
    )
    Run.objects.filter(pk=run.pk).update(
        index_id=spec.index_id,
        status=Run.Status.FINISHED if trained else Run.Status.FAILED,
        error="" if trained else "the bundle ends before this arm's model was evaluated",
        started_at=experiment.started_at,
        finished_at=experiment.finished_at,
    )
    log = bundle.root / f"train_{arm.name}.log"
    try:
        batch = OutputTailer(folder, log_path=log if log.is_file() else None).read()
    except (ValueError, UnicodeDecodeError) as exc:
        raise bundle.error(f"runs/{arm.name}", f"unreadable trainer output: {exc}") from None
    store_batch(run_id=run.pk, batch=batch)
    return run


def _train_dataset(bundle: Bundle) -> Dataset:
    """What the arms trained on: the questions the screen kept (as webapp.experiments.stage_specs names them)."""
    rows = bundle.rows("train_questions.jsonl")
    if not rows:
        raise bundle.error("train_questions.jsonl", "holds no question")
    return experiment_dataset(rows=rows, label="train-screened")


def _stage_file(stage: Stage) -> str | None:
    if stage.role == ExperimentRun.Role.SCREEN:
        return f"eval_screen_{stage.arm.rsplit('-', 1)[-1]}.jsonl"
    if stage.role == ExperimentRun.Role.START_EVAL:
        return "eval_start.jsonl"
    if stage.role == ExperimentRun.Role.EVAL:
        return f"eval_trained_{stage.arm}.jsonl"
    return None


def experiment_import(
    *,
    path: str | Path,
    index_folder: str | Path,
    name: str = "",
    user: AbstractBaseUser | None = None,
    label: str = "",
) -> Experiment:
    """Store the experiment of a bundle (see the module's doc); all or nothing. Raises DataImportError (the
    bundle, file, line, field at fault) or ExperimentConfigError (the index). ``label`` names the bundle in
    errors and in the experiment's name (an upload's own file name), by default its file name."""
    path = Path(path)
    bundle = unpack(path, label)
    try:
        return _import_bundle(bundle, path, index_folder, name, user, label)
    except BaseException:
        if bundle.unpacked_now:  # a failed import leaves no files behind (its rows were rolled back)
            shutil.rmtree(bundle.root.parent, ignore_errors=True)
        raise


def _import_bundle(
    bundle: Bundle,
    path: Path,
    index_folder: str | Path,
    name: str,
    user: AbstractBaseUser | None,
    label: str,
) -> Experiment:
    described = bundle.json("experiment.json")
    index = index_for_folder(index_folder)
    _check_index(bundle, index)
    log_lines = (
        (bundle.root / "log.txt").read_text(encoding="utf-8", errors="replace").splitlines()
        if (bundle.root / "log.txt").is_file()
        else []
    )
    with transaction.atomic():
        spec = _spec(bundle, described, index)
        now = timezone.now()
        experiment = Experiment.objects.create(
            name=name or f"{described.get('name') or 'experiment'} (imported from {bundle.label})",
            spec={**spec.to_json(), IMPORTED_FROM: label or str(path.resolve())},
            status=Experiment.Status.RUNNING,
            log_tail="\n".join(log_lines[-LOG_TAIL_LINES:]),
            created_by=user,
            started_at=now,
            finished_at=now,
            heartbeat_at=now,
        )
        missing = []
        runs: dict[tuple[str, str], Run] = {}
        for position, stage in enumerate(experiment_stages(spec)):
            file = _stage_file(stage)
            if stage.role == ExperimentRun.Role.TRAIN:
                if not (bundle.root / "runs" / stage.arm / "run_config.json").is_file():
                    missing.append(f"training of {stage.arm}")
                    continue
                run = _train_run(bundle, experiment, spec, spec.arm(stage.arm), user)
            else:
                assert file is not None
                if not (bundle.root / file).is_file():
                    missing.append(file)
                    continue
                model, base = spec.model, None
                if stage.role == ExperimentRun.Role.EVAL:
                    train = runs.get((ExperimentRun.Role.TRAIN.value, stage.arm))
                    model = str(train.config["output_dir"]) if train else spec.model
                    baseline = spec.arm(spec.baseline)
                    base_key = (
                        (ExperimentRun.Role.START_EVAL.value, "")
                        if stage.arm == baseline.name
                        else (ExperimentRun.Role.EVAL.value, baseline.name)
                    )
                    base = runs[base_key].pk if base_key in runs else None
                run = _eval_run(bundle, experiment, spec, stage, file, model, base, user)
            runs[(stage.role, stage.arm)] = run
            stage_attach(experiment, stage, position, run)
    from webapp.experiments.services import experiment_store_result

    experiment_store_result(experiment_id=experiment.pk)
    status = Experiment.Status.FAILED if missing else Experiment.Status.FINISHED
    error = f"imported from {bundle.label}; the bundle has no {', no '.join(missing)}" if missing else ""
    Experiment.objects.filter(pk=experiment.pk).update(status=status, error=error)
    experiment.refresh_from_db()
    return experiment
