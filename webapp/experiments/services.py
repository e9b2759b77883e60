"""Writes of experiments: creation, and execution to the end (its inputs are resolved by
:mod:`webapp.experiments.inputs`, the process executing it is tracked by :mod:`webapp.experiments.processes`).

Execution is a fixed list of stages (:func:`experiment_stages`): the start model evaluated in every method's
format, then per seed pair and per arm (the baseline first) a training run and the evaluation of the model it
saved. Each stage is an ordinary run made by the project's own services — a train run supervised by
``webapp.training.supervisor`` (``python -m trainer.train CONFIG`` as a subprocess, metrics and samples ingested;
or, with the spec's executor ``ray``, a Ray job the supervisor submits and follows), an eval run executed by
``webapp.evaluation.services`` in this process — linked to the experiment by an :class:`ExperimentRun` row (with
the stage's seed).

Resuming is executing again: a stage whose run finished is reused; a stage whose run did not finish (the process
was killed, the trainer crashed) gets a new run, the old one is marked crashed (its orphaned trainer, if still
alive on this machine, is killed first). Every arm trains from the same start model with the same questions; the
arms of a seed pair with the same seed, so in the same order (the trainer seeds torch, the data order and sampling
from ``training.seed``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NamedTuple

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from trainer.config import TINY_MODEL, ConfigError
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.evaluation.services import evaluation_run_create, evaluation_run_execute
from webapp.evaluation.specs import EvaluationConfigError
from webapp.experiments.inputs import experiment_dir
from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.processes import (
    Say,
    experiment_claim,
    experiment_finish,
    experiment_log,
    stage_abandon,
)
from webapp.experiments.specs import (
    IMPORTED_FROM,
    Arm,
    ExperimentConfigError,
    ExperimentSpec,
    experiment_spec_check,
)
from webapp.experiments.stage_specs import (
    evaluation_spec,
    training_config,
    training_config_check,
    training_dataset,
)
from webapp.runs.models import Run
from webapp.training import executors
from webapp.training.models import TrainingProcess
from webapp.training.services import training_run_create

logger = logging.getLogger(__name__)
START_MODEL_DIR = "start-model"


# --- Creation --------------------------------------------------------------------------------------------------


@transaction.atomic
def experiment_create(
    *, user: AbstractBaseUser | None, spec: ExperimentSpec, name: str = "", enqueue: bool = True
) -> Experiment:
    """A pending experiment; its task (on the ``train`` queue) is queued once the transaction commits."""
    experiment_spec_check(spec)
    for field, model, pk in (
        ("train_questions", Dataset, spec.train_dataset_id),
        ("eval_questions", Dataset, spec.eval_dataset_id),
        ("index", Index, spec.index_id),
    ):
        if not model.objects.filter(pk=pk).exists():
            raise ExperimentConfigError(field, f"no {model.__name__.lower()} {pk}")
    training_config_check(spec)
    seeds = f"seeds {spec.seed}–{spec.seed_list[-1]}" if spec.seeds > 1 else f"seed {spec.seed}"
    experiment = Experiment.objects.create(
        name=name or f"{' vs '.join(a.name for a in spec.ordered_arms())} · {spec.steps} steps · {seeds}",
        spec=spec.to_json(),
        created_by=user,
    )
    if enqueue:
        transaction.on_commit(lambda: _enqueue(experiment.pk))
    return experiment


def _enqueue(experiment_id: int) -> None:
    from webapp.experiments.tasks import experiment_run_task

    experiment_run_task.delay(experiment_id)


@transaction.atomic
def experiment_resume_request(*, experiment_id: int) -> Experiment:
    """Queue a failed or interrupted experiment again (its finished stages are reused)."""
    experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
    if (experiment.spec or {}).get(IMPORTED_FROM):
        # webapp.experiments.spool_replay: its models stayed on the machine that ran it; nothing here goes on with it
        raise ExperimentConfigError("experiment", "an imported experiment cannot be resumed here")
    if experiment.status == Experiment.Status.FAILED:
        experiment.status = Experiment.Status.PENDING
        experiment.save(update_fields=["status"])
        transaction.on_commit(lambda: _enqueue(experiment_id))
    return experiment


# --- Execution -------------------------------------------------------------------------------------------------


class Stage(NamedTuple):
    role: str
    method: str
    arm: str  # "" for the start model's evaluation, which every arm of the method shares
    # the seed pair's (training.seed); the experiment's first seed for the screen and the start model's evaluation
    seed: int
    paired: bool = False  # the experiment has several seed pairs: the label names the seed

    @property
    def label(self) -> str:
        seed = f" · seed {self.seed}" if self.paired and self.role in _PER_SEED else ""
        return f"{self.role} {self.arm or self.method}{seed}"


_PER_SEED = (ExperimentRun.Role.TRAIN.value, ExperimentRun.Role.EVAL.value)


def experiment_stages(spec: ExperimentSpec) -> list[Stage]:
    """In execution order: the screen's samples of the training questions (in the baseline arm's format), the start
    model in every method's format (once per method, whatever its arms), then per seed pair train → evaluate per
    arm, the baseline first."""
    baseline = spec.arm(spec.baseline)
    paired = spec.seeds > 1
    stages = [
        Stage(ExperimentRun.Role.SCREEN.value, baseline.method, f"sample-{i + 1}", spec.seed, paired)
        for i in range(spec.screen_samples)
    ]
    stages += [
        Stage(ExperimentRun.Role.START_EVAL.value, method, "", spec.seed, paired) for method in spec.methods
    ]
    for seed in spec.seed_list:
        for arm in spec.ordered_arms():
            stages += [
                Stage(ExperimentRun.Role.TRAIN.value, arm.method, arm.name, seed, paired),
                Stage(ExperimentRun.Role.EVAL.value, arm.method, arm.name, seed, paired),
            ]
    return stages


def _start_model(experiment: Experiment, spec: ExperimentSpec) -> str:
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


def _create_train_run(experiment: Experiment, spec: ExperimentSpec, arm: Arm, model: str, seed: int) -> Run:
    """A pending train run made by the training app's own service, supervised here instead of by a Celery task, on
    the spec's executor (a ``ray`` run is submitted as a Ray job by the supervisor), trained with the seed pair's
    seed."""
    index = Index.objects.get(pk=spec.index_id)
    return training_run_create(
        user=experiment.created_by,
        name=f"exp{experiment.pk} train · {arm.name}" + (f" · seed {seed}" if spec.seeds > 1 else ""),
        config=training_config(spec, arm, model, index, seed=seed),
        dataset=training_dataset(experiment, spec),
        index=index,
        enqueue=False,
        executor=spec.executor,
    )


def _ray_job(run: Run) -> TrainingProcess | None:
    """The run's process row when its trainer is (or was) a Ray job."""
    return TrainingProcess.objects.filter(run_id=run.pk, executor=executors.RAY).first()


def trained_model_dir(run: Run) -> Path:
    """Where a train run's trainer saved its model: the run's output folder; for a Ray job, its folder on the
    cluster's node (``RAY_RUNS_DIR``/<id>/output, the runs folder when unset), which this worker must read too."""
    if _ray_job(run) is not None:
        return Path(executors.job_config(run)["output_dir"])
    return Path(run.config["output_dir"])


def _link(experiment: Experiment, stage: Stage) -> ExperimentRun | None:
    return (
        ExperimentRun.objects.filter(
            experiment=experiment, role=stage.role, method=stage.method, arm=stage.arm, seed=stage.seed
        )
        .select_related("run")
        .first()
    )


@transaction.atomic
def stage_attach(experiment: Experiment, stage: Stage, position: int, run: Run) -> None:
    """Link ``run`` to the experiment as ``stage`` (a restarted stage's link points at its new run)."""
    link = (
        ExperimentRun.objects.select_for_update()
        .filter(experiment=experiment, role=stage.role, method=stage.method, arm=stage.arm, seed=stage.seed)
        .first()
    )
    if link is None:
        ExperimentRun.objects.create(
            experiment=experiment,
            role=stage.role,
            method=stage.method,
            arm=stage.arm,
            seed=stage.seed,
            position=position,
            run=run,
        )
    else:
        link.run, link.attempts, link.position = run, link.attempts + 1, position
        link.save(update_fields=["run", "attempts", "position"])


def _supervised(run: Run) -> Run:
    """Supervise a train run here to its end (``python -m trainer.train`` as a subprocess, or its Ray job followed
    through Ray's Jobs API); a run that finished without a model this worker can read failed."""
    from webapp.training.supervisor import supervise

    supervise(run.pk)
    run = Run.objects.get(pk=run.pk)
    folder = trained_model_dir(run)
    if run.status == Run.Status.FINISHED and not (folder / "config.json").is_file():
        where = " (a Ray job's RAY_RUNS_DIR must be storage this worker reads)" if _ray_job(run) else ""
        error = f"the trainer saved no model in {folder}{where}"
        # run_mark_finished keeps the first final status: a finished run is turned failed here
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error=error)
        return Run.objects.get(pk=run.pk)
    return run


def _abandon(run: Run, experiment_id: int) -> None:
    """A stage's unfinished run left by a dead process: its Ray job, if it still runs, is stopped through Ray
    (nothing else would), then the run is abandoned as a local one is."""
    process = _ray_job(run) if run.is_active else None
    if process is not None and process.job_id:
        try:
            executors.job_client().stop_job(process.job_id)
        except Exception:  # the cluster is unreachable, or the job is gone: the run is marked crashed anyway
            logger.warning("run %s: cannot stop Ray job %s", run.pk, process.job_id, exc_info=True)
    stage_abandon(run, experiment_id)


def _run_stage(
    experiment: Experiment,
    spec: ExperimentSpec,
    stage: Stage,
    position: int,
    start_model: str,
    say: Say | None,
) -> Run:
    if stage.role == ExperimentRun.Role.TRAIN:
        with transaction.atomic():
            run = _create_train_run(experiment, spec, spec.arm(stage.arm), start_model, stage.seed)
            stage_attach(experiment, stage, position, run)
        where = f" as a Ray job on {settings.RAY_ADDRESS}" if spec.executor == executors.RAY else ""
        experiment_log(
            experiment.pk,
            f"training {stage.arm} (seed {stage.seed}) from {start_model}{where}: run #{run.pk}, "
            f"{spec.steps} steps",
            say,
        )
        return _supervised(run)
    start = Stage(ExperimentRun.Role.START_EVAL.value, stage.method, "", spec.seed)
    sample = 0
    if stage.role in (ExperimentRun.Role.SCREEN, ExperimentRun.Role.START_EVAL):
        sample = int(stage.arm.rsplit("-", 1)[-1]) if stage.role == ExperimentRun.Role.SCREEN else 0
        arm, model, base_run_id = Arm(stage.method, stage.method), start_model, None
        label = f"screen {sample}" if sample else "start"
    else:
        arm = spec.arm(stage.arm)
        train = _link(experiment, stage._replace(role=ExperimentRun.Role.TRAIN.value))
        assert train is not None  # its stage came first
        model, label = str(trained_model_dir(train.run)), "trained"
        if spec.seeds > 1:
            label += f" seed {stage.seed}"
        # The baseline arm's trained model is compared with its start, every other arm with the trained baseline
        # of its seed pair.
        baseline = spec.arm(spec.baseline)
        base = _link(
            experiment,
            start
            if arm.name == baseline.name
            else Stage(ExperimentRun.Role.EVAL.value, baseline.method, baseline.name, stage.seed),
        )
        base_run_id = base.run_id if base is not None else None
    with transaction.atomic():
        run = evaluation_run_create(
            user=experiment.created_by,
            spec=evaluation_spec(spec, arm, model, sample),
            name=f"exp{experiment.pk} {label} · {arm.name}",
            base_run_id=base_run_id,
            enqueue=False,
        )
        stage_attach(experiment, stage, position, run)
    experiment_log(
        experiment.pk,
        f"screen sample {sample}: the start model on the training questions, run #{run.pk}"
        if sample
        else f"evaluating the {label} model in {arm.method}'s format: run #{run.pk}",
        say,
    )
    return evaluation_run_execute(run_id=run.pk)


def experiment_store_result(*, experiment_id: int) -> dict[str, Any]:
    """Recompute the table and the paired-bootstrap differences from the finished runs, and store them."""
    from webapp.experiments.selectors import experiment_result

    experiment = Experiment.objects.get(pk=experiment_id)
    result = experiment_result(experiment=experiment)
    Experiment.objects.filter(pk=experiment_id).update(result=result)
    return result


def experiment_execute(*, experiment_id: int, say: Say | None = None) -> Experiment:
    """Execute (or resume) an experiment to its end; returns it finished, or failed with the reason. Raises
    :class:`ExperimentBusy` when another live process executes it; an interruption (KeyboardInterrupt, SystemExit)
    marks it failed and propagates."""
    experiment = experiment_claim(experiment_id)
    spec = ExperimentSpec.from_json(experiment.spec)
    stages = experiment_stages(spec)
    try:
        experiment_spec_check(spec)
        start_model = _start_model(experiment, spec)
        for position, stage in enumerate(stages):
            link = _link(experiment, stage)
            if link is not None and link.run.status == Run.Status.FINISHED:
                experiment_log(
                    experiment_id,
                    f"stage {position + 1}/{len(stages)} {stage.label}: run #{link.run_id} reused",
                    say,
                )
                continue
            if link is not None:
                experiment_log(
                    experiment_id,
                    f"stage {position + 1}/{len(stages)} {stage.label}: run #{link.run_id} "
                    f"{link.run.status}, restarting it",
                    say,
                )
                _abandon(link.run, experiment_id)
            run = _run_stage(experiment, spec, stage, position, start_model, say)
            if run.status != Run.Status.FINISHED:
                error = f"stage {stage.label}: run #{run.pk} {run.status}: {run.error}".strip()
                experiment_log(experiment_id, error, say)
                return experiment_finish(experiment_id, Experiment.Status.FAILED, error)
            experiment_log(
                experiment_id,
                f"stage {position + 1}/{len(stages)} {stage.label}: run #{run.pk} finished",
                say,
            )
            if stage.role in (ExperimentRun.Role.START_EVAL, ExperimentRun.Role.EVAL):
                experiment_store_result(experiment_id=experiment_id)
    except (ExperimentConfigError, EvaluationConfigError, ConfigError) as exc:
        experiment_log(experiment_id, f"failed: {exc}", say)
        return experiment_finish(experiment_id, Experiment.Status.FAILED, str(exc))
    except Exception as exc:
        logger.exception("experiment %s failed", experiment_id)
        experiment_log(experiment_id, f"failed: {type(exc).__name__}: {exc}", say)
        return experiment_finish(experiment_id, Experiment.Status.FAILED, f"{type(exc).__name__}: {exc}")
    except BaseException:
        experiment_finish(experiment_id, Experiment.Status.FAILED, "interrupted; resume it to continue")
        raise
    experiment_store_result(experiment_id=experiment_id)
    experiment_log(experiment_id, "finished", say)
    return experiment_finish(experiment_id, Experiment.Status.FINISHED)
