"""Writes of experiments: creation, resume, and execution to the end (its inputs are resolved by
:mod:`webapp.experiments.inputs`, the process executing it is tracked by :mod:`webapp.experiments.processes`).

Execution is the stage runner's, ``python -m trainer.jobs experiment`` (:mod:`trainer.jobs`), the same that runs
an experiment on a machine without the web app: :mod:`webapp.experiments.runner_launch` writes its inputs into the
experiment's folder and builds its command from the spec, :mod:`webapp.experiments.runner_placement` starts it where
the spec's executor says (a subprocess of this worker, or a Ray job), and :mod:`webapp.experiments.runner_follow`
replays its spool into the experiment as it grows (:mod:`webapp.experiments.spool_replay`), to its end. The stages
and their links are :mod:`webapp.experiments.stage_links`'.

Resuming is executing again with the same spool: the runner skips the stages it finished, the replay the stages it
stored; a runner a dead worker left is stopped first. Every arm trains from the same start model with the same
questions; the arms of a seed pair with the same seed, so in the same order.
"""

from __future__ import annotations

import logging

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from trainer.config import ConfigError
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.experiments.models import Experiment
from webapp.experiments.processes import Say, experiment_claim, experiment_finish, experiment_log
from webapp.experiments.runner_follow import runner_follow
from webapp.experiments.runner_launch import runner_launch
from webapp.experiments.runner_placement import runner_start
from webapp.experiments.specs import (
    IMPORTED_FROM,
    ExperimentConfigError,
    ExperimentSpec,
    experiment_spec_check,
)
from webapp.experiments.stage_links import (
    Stage,
    experiment_stages,
    experiment_store_result,
    stage_attach,
    stage_link,
)
from webapp.experiments.stage_specs import training_config_check

logger = logging.getLogger(__name__)
__all__ = [
    "Stage",
    "experiment_stages",
    "experiment_store_result",
    "stage_attach",
    "stage_link",
    "training_config_check",
]


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


def experiment_execute(*, experiment_id: int, say: Say | None = None) -> Experiment:
    """Execute (or resume) an experiment to its end through the stage runner; returns it finished, or failed with
    the reason. Raises :class:`ExperimentBusy` when another live process executes it; an interruption
    (KeyboardInterrupt, SystemExit) stops the runner, marks the experiment failed and propagates."""
    experiment = experiment_claim(experiment_id)
    spec = ExperimentSpec.from_json(experiment.spec)
    try:
        experiment_spec_check(spec)
        launch = runner_launch(experiment, spec)
        runner = runner_start(launch, spec.executor, experiment_id)
        experiment_log(experiment_id, f"stage runner started ({runner.where}); its spool: {launch.out}", say)
        return runner_follow(experiment_id, launch, runner, say)
    except (ExperimentConfigError, ConfigError) as exc:
        experiment_log(experiment_id, f"failed: {exc}", say)
        return experiment_finish(experiment_id, Experiment.Status.FAILED, str(exc))
    except Exception as exc:
        logger.exception("experiment %s failed", experiment_id)
        experiment_log(experiment_id, f"failed: {type(exc).__name__}: {exc}", say)
        return experiment_finish(experiment_id, Experiment.Status.FAILED, f"{type(exc).__name__}: {exc}")
    except BaseException:
        experiment_finish(experiment_id, Experiment.Status.FAILED, "interrupted; resume it to continue")
        raise
