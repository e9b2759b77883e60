"""A run's trainer config (trainer.config.RunConfig) from the values a form or an experiment gives, and the models
on this machine a run can start from.

Validation rules live in trainer.config and scoring.params, so the browser, an experiment and ``python -m
trainer.train`` can never disagree on what a valid run is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings

from scoring.scorer import ScoringInputError, method_params
from trainer.config import TINY_MODEL, ConfigError, RunConfig, config_from_dict, merge

DEFAULT_MODEL_DIR = "models/SmolLM2-135M-Instruct"  # under VAR_DIR, written by `python -m agent.setup_model`

WARM_MODEL_DIR = "models/SmolLM2-135M-Instruct-warm"  # trainer.warm_start.ensure_demo_warm_model (make demo)


def base_model_path() -> str:
    """SmolLM2 when `python -m agent.setup_model` has written it, else the tiny random model."""
    folder = Path(settings.VAR_DIR) / DEFAULT_MODEL_DIR
    return str(folder) if (folder / "config.json").is_file() else TINY_MODEL


def default_model_path() -> str:
    """The policy a new run starts from: the warm-started SmolLM2 when the demo has made it (a base model that
    never writes the format earns reward 0 and learns nothing), else SmolLM2, else the tiny random model."""
    warm = Path(settings.VAR_DIR) / WARM_MODEL_DIR
    return str(warm) if (warm / "config.json").is_file() else base_model_path()


def available_models() -> list[tuple[str, str]]:
    """(path, label) of the policies on this machine: model folders under VAR_DIR/models and the output of every
    finished warm-start run — offered by the new-run and evaluation forms."""
    from webapp.runs.models import Run

    found: dict[str, str] = {}
    models = Path(settings.VAR_DIR) / "models"
    if models.is_dir():
        for folder in sorted(models.iterdir()):
            if (folder / "config.json").is_file():
                found[str(folder)] = folder.name
    runs = Run.objects.filter(kind=Run.Kind.WARM_START, status=Run.Status.FINISHED).order_by("-pk")
    for run in runs.only("pk", "name", "config")[:50]:
        folder = Path(str(run.config.get("output_dir", "")))
        if (folder / "config.json").is_file():
            found.setdefault(str(folder), f"warm start #{run.pk} {run.name}")
    return list(found.items())


def warm_start_values(values: Mapping[str, Any], *, output_dir: str, data_path: str) -> dict[str, Any]:
    """trainer.warm_start's config dict: the form's config-derived values (webapp.common.config_form.config_values)
    with the run's own folders."""
    return merge(dict(values), {"output_dir": output_dir, "data": {"path": data_path}})


def run_config(values: Mapping[str, Any], *, output_dir: str, data_path: str = "") -> RunConfig:
    """The trainer's config of a run from its values (a form's or an experiment's) and its folders, validated by
    trainer.config's rules and the method's weights by scoring's; raises ConfigError like the trainer."""
    config = config_from_dict(merge(dict(values), {"output_dir": output_dir, "data": {"path": data_path}}))
    check_reward_params(config.method, config.reward.params)
    return config


def check_reward_params(method: str, params: Mapping[str, Any]) -> None:
    """The method's weights against its declaration in scoring.params (ranges, choices, unknown keys)."""
    try:
        method_params(method, params)
    except ScoringInputError as exc:
        if exc.field.startswith("params"):
            raise ConfigError(f"reward.{exc.field}", exc.message) from None
