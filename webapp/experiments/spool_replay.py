"""An experiment run elsewhere, replayed from its spool: ``python -m trainer.jobs experiment --out DIR`` runs an
experiment's stages on a machine without the web app and writes one folder (its format: the experiment spool, read
here; ``webapp.experiments.legacy_bundle`` turns the older bundle of bench/experiment_gpu.py into one). This makes
of it the experiment, stages and runs ``manage.py experiment`` would have stored, so the experiment page, the compare
page, the runs' pages and audits read it like any other.

- ``manifest.json`` gives the arms, baseline, seeds, start model, judge and screen; the first training stage's
  trainer config gives the knobs (:data:`webapp.experiments.specs.KNOBS`);
- ``questions/*.jsonl`` become the experiment's datasets; ``index_metadata.json``'s corpus checksum must be the
  local index's;
- a ``stages/train-<arm>-s<k>`` folder IS a run spool, replayed by :mod:`webapp.training.spool_replay`; an
  evaluation stage's ``records.jsonl`` goes through the trajectories import (parsed and scored by ``scoring``, as
  an imported file is), then the run's report is computed from it.

Only finished stages are stored; those not finished are named in the experiment's error and it stays failed (it
cannot be resumed here: its models stayed on the other machine). The manifest's ``id`` finds the experiment a first
replay made, so replaying again stores nothing new, and a spool that grew adds the stages finished since. A replay is
one transaction: a malformed file names the spool, the file, the line and the field, and nothing is stored.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from webapp.common.importing import DataImportError
from webapp.datasets.models import Dataset
from webapp.evaluation.services import evaluation_report_ensure
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.specs import (
    IMPORTED_FROM,
    Arm,
    ExperimentSpec,
)
from webapp.experiments.spool_reading import (
    MANIFEST,
    ROLE,
    ExperimentSpool,
    finished_stage,
    import_lines,
    read_manifest,
    spool_dataset,
    spool_index,
    spool_spec,
    spool_time,
    stage_failure,
    stage_key,
)
from webapp.experiments.stage_links import (
    Stage,
    experiment_stages,
    experiment_store_result,
    stage_attach,
    stage_link,
)
from webapp.experiments.stage_specs import evaluation_spec
from webapp.runs.models import Run
from webapp.runs.services import run_create, run_mark_finished
from webapp.training.spool_replay import spool_replay
from webapp.trajectories.services import trajectory_import

SPOOL_ID = "spool_id"  # the key in Experiment.spec holding the manifest's id, next to IMPORTED_FROM
LOG_TAIL_LINES = 200


@dataclass
class ExperimentReplay:
    """What a replay did: the experiment (made now or found), the stages it added and those still missing."""

    experiment: Experiment
    created: bool
    added: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        from webapp.experiments.reporting import result_text

        experiment = self.experiment
        lines = [
            f"experiment #{experiment.pk} ({'created' if self.created else 'existing'}) {experiment.name}: "
            f"{experiment.status}",
            f"stages added: {', '.join(self.added) or 'none'}",
        ]
        return lines + ([experiment.error] if experiment.error else []) + [result_text(experiment.result)]


# --- storing ---------------------------------------------------------------------------------------------------


@dataclass
class _Replay:
    """One replay under way: the spool, the experiment and its spec, and the runs of its stages so far."""

    spool: ExperimentSpool
    experiment: Experiment
    spec: ExperimentSpec
    user: AbstractBaseUser | None
    runs: dict[Stage, Run] = field(default_factory=dict)

    def run_of(self, role: str, method: str, arm: str, seed: int) -> Run | None:
        return self.runs.get(Stage(role, method, arm, seed))

    def keep(self, stage: Stage, run: Run) -> None:
        self.runs[Stage(stage.role, stage.method, stage.arm, stage.seed)] = run


def _eval_run(replay: _Replay, stage: Stage, key: str, manifest: dict[str, Any]) -> Run:
    spool, spec, experiment = replay.spool, replay.spec, replay.experiment
    seed = stage.seed
    sample = int(stage.arm.rsplit("-", 1)[-1]) if stage.role == ROLE.SCREEN else 0
    arm = spec.arm(stage.arm) if stage.role == ROLE.EVAL else Arm(stage.method, stage.method)
    model, base = str(manifest.get("model") or spec.model), None
    if stage.role == ROLE.EVAL:
        train = replay.run_of(ROLE.TRAIN.value, arm.method, arm.name, seed)
        model = str(manifest.get("model") or (train.config.get("output_dir") if train else "") or spec.model)
        base = _base_run(replay, stage)
    evaluation = evaluation_spec(spec, arm, model, sample)
    dataset = Dataset.objects.get(pk=evaluation.dataset_ids[0])
    label = f"screen {sample}" if sample else "start" if stage.role == ROLE.START_EVAL else "trained"
    label += f" seed {seed}" if stage.role == ROLE.EVAL and stage.paired else ""  # as services names it
    records = f"stages/{key}/records.jsonl"
    run = run_create(
        name=f"exp{experiment.pk} {label} · {arm.name}",
        method=arm.method,
        model_name=model,
        kind=Run.Kind.EVAL,
        dataset_id=dataset.pk,
        config={**evaluation.to_json(), IMPORTED_FROM: spool.where(records)},
        created_by=replay.user,
        base_run_id=base.pk if base is not None else None,
    )
    name = f"stages/{key}/{MANIFEST}"
    Run.objects.filter(pk=run.pk).update(
        index_id=spec.index_id,
        judge_settings=asdict(
            evaluation.judge
        ),  # as evaluation_run_create stores it: the key's variable only
        status=Run.Status.FINISHED,
        started_at=spool_time(spool, name, manifest, "started_at") or experiment.started_at,
        finished_at=spool_time(spool, name, manifest, "finished_at") or experiment.finished_at,
    )
    with tempfile.TemporaryDirectory(prefix="records-") as folder:
        lines = import_lines(spool, records, arm, dataset, Path(folder) / "records.jsonl")
        trajectory_import(
            path=lines, run_id=run.pk, dataset_name=dataset.name, display_name=spool.where(records)
        )
    evaluation_report_ensure(run_id=run.pk)
    return Run.objects.get(pk=run.pk)


def _base_run(replay: _Replay, stage: Stage) -> Run | None:
    """An evaluation's base: the baseline's trained model against its start; every other arm against the baseline
    of its seed."""
    spec = replay.spec
    baseline = spec.arm(spec.baseline)
    if stage.arm == baseline.name:
        return replay.run_of(ROLE.START_EVAL.value, baseline.method, "", spec.seed)
    return replay.run_of(ROLE.EVAL.value, baseline.method, baseline.name, stage.seed)


def _train_dataset(spool: ExperimentSpool) -> Dataset:
    """What the arms trained on: the questions the screen kept, in training order."""
    return spool_dataset(spool, "questions/train.jsonl", "train-screened")


def _train_run(replay: _Replay, stage: Stage, key: str, *, finished: bool = True) -> Run:
    """The stage's run spool replayed into a run of its own (webapp.training.spool_replay), then named as the
    experiment's training and given its dataset and index; ``finished=False``: a trainer still running (its curve
    so far; a later replay finds the run by the spool's id and adds the rest)."""
    spool, spec = replay.spool, replay.spec
    result = spool_replay(spool.root / "stages" / key, user=replay.user, label=spool.where(f"stages/{key}"))
    run = Run.objects.get(pk=result.run_id)
    run.config = {**(run.config or {}), IMPORTED_FROM: spool.where(f"stages/{key}")}
    train = spool.root / "questions" / "train.jsonl"
    Run.objects.filter(pk=run.pk).update(
        name=f"exp{replay.experiment.pk} train · {stage.arm}"
        + (f" · seed {stage.seed}" if stage.paired else ""),
        dataset_id=_train_dataset(spool).pk if train.is_file() else run.dataset_id,
        index_id=spec.index_id,
        config=run.config,
    )
    if finished:
        # The trainer exited 0 (what makes the stage finished): a spool whose last batch lacks the final status
        # still ends its run finished.
        Run.objects.filter(pk=run.pk, finished_at__isnull=True).update(
            status=Run.Status.FINISHED, finished_at=run.heartbeat_at or timezone.now()
        )
    return Run.objects.get(pk=run.pk)


def _experiment(
    spool: ExperimentSpool, manifest: dict[str, Any], spec: ExperimentSpec, name: str, user: Any
) -> Experiment:
    now = timezone.now()
    return Experiment.objects.create(
        name=name or f"{manifest.get('name') or 'experiment'} (imported from {spool.shown.split(':')[0]})",
        spec={**spec.to_json(), IMPORTED_FROM: spool.shown, SPOOL_ID: manifest["id"]},
        status=Experiment.Status.RUNNING,
        created_by=user,
        started_at=spool_time(spool, MANIFEST, manifest, "started_at") or now,
        finished_at=now,
        heartbeat_at=now,
    )


def _replay_stages(replay: _Replay, *, live: bool = False) -> tuple[list[str], list[str]]:
    """Store every finished stage not stored yet; the keys added and those not finished. ``live``: a training stage
    whose trainer still runs is replayed too (its run grows as the trainer reports)."""
    experiment, spec = replay.experiment, replay.spec
    for link in ExperimentRun.objects.filter(experiment=experiment).select_related("run"):
        replay.keep(Stage(link.role, link.method, link.arm, link.seed), link.run)
    added, missing = [], []
    for position, stage in enumerate(experiment_stages(spec)):
        key = stage_key(stage)
        stored = stage_link(experiment, stage)
        if stored is not None and stored.run.status == Run.Status.FINISHED:
            continue  # a replay before stored it
        manifest = finished_stage(replay.spool, stage, key)
        if manifest is None:
            missing.append(key)
            if (
                live
                and stage.role == ROLE.TRAIN
                and (replay.spool.root / "stages" / key / MANIFEST).is_file()
            ):
                run = _train_run(replay, stage, key, finished=False)
                if stored is not None and stored.run_id != run.pk and stored.run.is_active:
                    # the runner restarted this trainer (a resume): its earlier run ends here
                    run_mark_finished(run_id=stored.run_id, status=Run.Status.CRASHED, error="restarted")
                replay.keep(stage, run)
                stage_attach(experiment, stage, position, run)
            continue
        if live and stage.role == ROLE.EVAL and _base_run(replay, stage) is None:
            missing.append(key)  # its base finished after this replay looked: the next replay stores both
            continue
        if stage.role == ROLE.TRAIN:
            run = _train_run(replay, stage, key)
        else:
            run = _eval_run(replay, stage, key, manifest)
        replay.keep(stage, run)
        stage_attach(experiment, stage, position, run)
        added.append(key)
    return added, missing


def experiment_spool_follow(experiment_id: int, folder: str | Path) -> ExperimentReplay:
    """Bring an experiment of this app up to date with the spool its stage runner writes (webapp.experiments.
    runner_follow): its own spec, datasets and index; the finished stages not stored yet, and the trainers still
    running. Its status is the caller's to set. All or nothing; raises DataImportError."""
    folder = Path(folder)
    spool = ExperimentSpool(root=folder, shown=str(folder))
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
        if not (folder / MANIFEST).is_file():
            return ExperimentReplay(experiment=experiment, created=False)
        manifest = read_manifest(spool)
        if (experiment.spec or {}).get(SPOOL_ID) != manifest["id"]:
            experiment.spec = {**experiment.spec, SPOOL_ID: manifest["id"]}
            experiment.save(update_fields=["spec"])
        spec = ExperimentSpec.from_json(experiment.spec)
        added, missing = _replay_stages(_Replay(spool, experiment, spec, experiment.created_by), live=True)
        if any(not key.startswith(("train-", "screen-")) for key in added):
            experiment_store_result(experiment_id=experiment.pk)  # the seeded result, once per evaluation
    experiment.refresh_from_db()
    return ExperimentReplay(experiment=experiment, created=False, added=added, missing=missing)


def experiment_spool_replay(
    folder: str | Path,
    *,
    index_folder: str | Path | None = None,
    name: str = "",
    user: AbstractBaseUser | None = None,
    label: str = "",
) -> ExperimentReplay:
    """Store (or bring up to date) the experiment of the spool in ``folder`` (see the module's doc); all or nothing.
    ``label`` names the spool in errors (an upload's name and its top folder: ``results.tar.gz:out``), by default
    its path; the index is ``index_folder``, else found by the spool's corpus checksum. Raises DataImportError."""
    folder = Path(folder)
    spool = ExperimentSpool(root=folder, shown=label or str(folder))
    if not folder.is_dir():
        raise DataImportError(file=spool.shown, line=None, field=None, message="no such folder")
    manifest = read_manifest(spool)
    log = folder / "log.txt"
    log_lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
    with transaction.atomic():
        found = Experiment.objects.select_for_update().filter(spec__spool_id=manifest["id"]).first()
        if found is not None and not (found.spec or {}).get(
            IMPORTED_FROM
        ):  # an experiment of this app's runner
            return experiment_spool_follow(found.pk, folder)
        index = spool_index(spool, index_folder, (found.spec or {}).get("index_id") if found else None)
        spec = spool_spec(spool, manifest, index)
        if found is None:
            experiment = _experiment(spool, manifest, spec, name, user)
        else:  # a spool that grew: its spec may know the knobs now (its first training finished since)
            experiment = found
            experiment.spec = {
                **spec.to_json(),
                IMPORTED_FROM: found.spec[IMPORTED_FROM],
                SPOOL_ID: manifest["id"],
            }
            experiment.save(update_fields=["spec"])
        stages = {stage_key(stage): stage for stage in experiment_stages(spec)}
        added, missing = _replay_stages(_Replay(spool, experiment, spec, user))
        unfinished = [
            key + (f" ({why})" if (why := stage_failure(spool, stages[key], key)) else "") for key in missing
        ]
        experiment_store_result(experiment_id=experiment.pk)
        error = ""
        if missing:
            runner = f" (the runner says: {manifest['error']})" if manifest.get("error") else ""
            error = f"imported from {spool.shown}; the spool has no finished {', '.join(unfinished)}{runner}"
        Experiment.objects.filter(pk=experiment.pk).update(
            status=Experiment.Status.FAILED if missing else Experiment.Status.FINISHED,
            error=error,
            log_tail="\n".join(log_lines[-LOG_TAIL_LINES:]),
            finished_at=spool_time(spool, MANIFEST, manifest, "finished_at") or timezone.now(),
            heartbeat_at=timezone.now(),
        )
    experiment.refresh_from_db()
    return ExperimentReplay(experiment=experiment, created=found is None, added=added, missing=missing)
