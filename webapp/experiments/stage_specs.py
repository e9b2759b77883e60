"""What each stage of an experiment runs: an arm's trainer config (checked for every arm before anything runs) and an
evaluation's spec (the replayed evaluation runs' config)."""

from __future__ import annotations

from typing import Any

from agent.budgets import RolloutOverrides
from trainer.config import ConfigError, RunConfig, merge
from webapp.corpora.models import Index
from webapp.evaluation.specs import EvaluationSpec
from webapp.experiments.specs import (
    Arm,
    ExperimentConfigError,
    ExperimentSpec,
    experiment_spec_check,
    option_for,
)
from webapp.training.config import run_config


def training_config(
    spec: ExperimentSpec, arm: Arm, model: str, index: Index, *, seed: int | None = None
) -> RunConfig:
    """One arm's trainer config: its method and reward weights, the experiment's knobs, the agent rollout on its
    index with its judge, every other setting the trainer's default; ``seed`` (a seed pair's, default the spec's
    first) as training.seed. Raises ConfigError (trainer.config's and scoring's rules)."""
    option = spec.judge.rollout_option()
    values = merge(
        spec.run_values(),
        {
            "training": {"seed": spec.seed if seed is None else seed},
            "method": arm.method,
            "algorithm": spec.algorithm,
            "model": {"path": model},
            "rollout": {
                "factory": "agent",
                "options": {"index": index.path, **({"judge": option} if option else {})},
            },
            # PPO's advantages come from the critic, so TIRESRAG's GRPO group shaping is off under PPO.
            "reward": {"params": dict(arm.params), "tiresrag_group_shaping": spec.algorithm == "grpo"},
        },
    )
    return run_config(values, output_dir="(the run's folder)", data_path="-")


def training_config_check(spec: ExperimentSpec) -> None:
    """Build every arm's trainer config once (trainer.config's and scoring's rules), before anything runs."""
    experiment_spec_check(spec)
    index = Index.objects.get(pk=spec.index_id)
    for arm in spec.arms:
        try:
            training_config(spec, arm, spec.model, index)
        except ConfigError as exc:
            message = str(exc).split(": ", 1)[-1]
            if exc.field.startswith("reward.params."):  # a weight of the arm's: name it
                weight = exc.field.removeprefix("reward.params.")
                raise ExperimentConfigError("arm", f"{arm.name}: {weight} {message}") from None
            raise ExperimentConfigError(option_for(exc.field), f"{arm.name}: {message}") from None


def evaluation_spec(spec: ExperimentSpec, arm: Arm, model: str, screen_sample: int = 0) -> EvaluationSpec:
    """An evaluation in the arm's format, its rewards with the arm's weights (the start model's: the method's); a
    screen's sample (1..n) is the start model on the training questions, sampled as training samples them."""
    config = training_config(spec, arm, model, Index.objects.get(pk=spec.index_id))
    values: dict[str, Any] = {**config.agent_budgets(), "seed": spec.seed}
    if screen_sample:
        values.update(seed=spec.seed + screen_sample, temperature=config.training.temperature)
    rollout = RolloutOverrides.from_json(values)
    return EvaluationSpec(
        method=arm.method,
        model=model,
        dataset_ids=(spec.train_dataset_id if screen_sample else spec.eval_dataset_id,),
        index_id=spec.index_id,
        judge=spec.judge,
        params=dict(arm.params),
        # The training budgets: the models are evaluated in the conditions they were trained in.
        rollout=rollout,
        batch_size=spec.eval_batch_size,
        backend=spec.eval_engine,
    )
