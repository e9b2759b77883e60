"""An experiment's stages and the runs linked to them: the fixed list of stages (:func:`experiment_stages`), the
link of a stage to its run (:class:`ExperimentRun`), and the result recomputed from the finished runs.

The stages, in the stage runner's order (``python -m trainer.jobs experiment``): the screen's samples of the training
questions (in the baseline arm's format), the start model in every method's format (once per method, whatever its
arms), then per seed pair train → evaluate per arm, the baseline first.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db import transaction

from webapp.experiments.models import Experiment, ExperimentRun
from webapp.experiments.specs import ExperimentSpec
from webapp.runs.models import Run


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
    """In execution order (see the module's doc)."""
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


def stage_link(experiment: Experiment, stage: Stage) -> ExperimentRun | None:
    return (
        ExperimentRun.objects.filter(
            experiment=experiment, role=stage.role, method=stage.method, arm=stage.arm, seed=stage.seed
        )
        .select_related("run")
        .first()
    )


@transaction.atomic
def stage_attach(experiment: Experiment, stage: Stage, position: int, run: Run) -> None:
    """Link ``run`` to the experiment as ``stage`` (a restarted stage's link points at its new run, one attempt
    more)."""
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
    elif link.run_id != run.pk:
        link.run, link.attempts, link.position = run, link.attempts + 1, position
        link.save(update_fields=["run", "attempts", "position"])


def experiment_store_result(*, experiment_id: int) -> dict[str, Any]:
    """Recompute the table and the paired-bootstrap differences from the finished runs, and store them."""
    from webapp.experiments.selectors import experiment_result

    experiment = Experiment.objects.get(pk=experiment_id)
    result = experiment_result(experiment=experiment)
    Experiment.objects.filter(pk=experiment_id).update(result=result)
    return result
