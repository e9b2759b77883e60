"""The new-run form's values ↔ the trainer's config dict (trainer.config), and its errors back onto form fields.

Validation rules live in trainer.config and scoring.scorer; this module only translates names, so the browser and
``python -m trainer.train`` can never disagree on what a valid run is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings

from scoring.scorer import ScoringInputError, score
from trainer.config import TINY_MODEL, ConfigError, config_from_dict

DEFAULT_MODEL_DIR = "models/SmolLM2-135M-Instruct"  # under VAR_DIR, written by `python -m agent.setup_model`

TRAINING_FIELDS = (
    "max_steps",
    "learning_rate",
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_iterations",
    "max_completion_length",
    "beta",
    "epsilon",
    "temperature",
    "loss_type",
    "seed",
)
PPO_FIELDS = ("critic_learning_rate", "gamma", "lam", "vf_coef")
BUDGET_FIELDS = ("max_turns", "max_turn_tokens", "max_rollout_tokens", "max_obs_tokens", "topk")
LAMBDA_FIELDS = ("lambda_f", "lambda_p")  # HiPRAG and Search-P1 weights; other keys go in reward_params

# A ConfigError's dotted field → the form field that shows it (prefix matches for training.* and ppo.*).
CONFIG_TO_FORM = {
    "method": "method",
    "algorithm": "algorithm",
    "model.path": "model_path",
    "model.lora": "lora",
    "model.trainable_layers": "trainable_layers",
    "data.limit": "question_limit",
    "data.path": "dataset",
    "rollout.factory": "rollout",
    "rollout.options": "index",
    "logging.sample_every": "sample_every",
    "logging.samples_per_log": "samples_per_log",
    "reward.tiresrag_group_shaping": "algorithm",
    **{f"training.{name}": name for name in TRAINING_FIELDS},
    **{f"ppo.{name}": name for name in PPO_FIELDS},
    **{f"rollout.{name}": name for name in BUDGET_FIELDS},
    **{f"reward.params.{name}": name for name in LAMBDA_FIELDS},
}


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


def warm_start_values(cleaned: Mapping[str, Any], *, output_dir: str, data_path: str) -> dict[str, Any]:
    """trainer.warm_start's config dict from the warm-start form."""
    index = cleaned.get("index")
    return {
        "output_dir": output_dir,
        "index": index.path if index is not None else "",
        "methods": list(cleaned["methods"]),
        "max_obs_tokens": cleaned["max_obs_tokens"],
        "max_turn_tokens": cleaned["max_turn_tokens"],
        "model": {"path": cleaned["model_path"]},
        "data": {
            "path": data_path,
            "split": cleaned.get("split") or "",
            "questions_per_method": cleaned["questions_per_method"],
            "no_search_share": cleaned["no_search_share"],
        },
        "training": {"epochs": cleaned["epochs"], "learning_rate": cleaned["learning_rate"]},
    }


def form_field_for(config_field: str) -> str | None:
    if config_field in CONFIG_TO_FORM:
        return CONFIG_TO_FORM[config_field]
    if config_field.startswith(("reward.params", "params.")):
        name = config_field.rsplit(".", 1)[-1]
        return name if name in LAMBDA_FIELDS else "reward_params"
    return None


def reward_params(cleaned: Mapping[str, Any]) -> dict[str, Any]:
    params = dict(cleaned.get("reward_params") or {})
    for name in LAMBDA_FIELDS:
        if cleaned.get(name) is not None:
            params[name] = cleaned[name]
    return params


def judge_option(cleaned: Mapping[str, Any]) -> str | dict[str, str] | None:
    """``rollout.options.judge`` (trainer.agent_rollout): None, "policy", or the endpoint — the key's env var NAME."""
    judge = cleaned.get("judge") or "none"
    if judge == "none":
        return None
    if judge in ("policy", "evidence"):
        return str(judge)
    option = {"base_url": cleaned["judge_base_url"], "model": cleaned["judge_model"]}
    if cleaned.get("judge_api_key_env"):
        option["api_key_env"] = cleaned["judge_api_key_env"]
    return option


def build_config(cleaned: Mapping[str, Any], *, output_dir: str, data_path: str = "") -> dict[str, Any]:
    """The full trainer config dict of a run from the form's cleaned data; raises ConfigError like the trainer."""
    rollout: dict[str, Any] = {
        "factory": cleaned["rollout"],
        "options": {},
        **{name: cleaned[name] for name in BUDGET_FIELDS if cleaned.get(name) is not None},
    }
    if cleaned["rollout"] == "agent":
        index = cleaned.get("index")
        if index is None:
            raise ConfigError(
                "rollout.options", "the agent rollout needs an index; pick one or use 'scripted'"
            )
        rollout["options"]["index"] = index.path
        judge = judge_option(cleaned)
        if judge is not None:
            rollout["options"]["judge"] = judge
    values: dict[str, Any] = {
        "output_dir": output_dir,
        "method": cleaned["method"],
        "algorithm": cleaned["algorithm"],
        "model": {
            "path": cleaned["model_path"],
            "lora": bool(cleaned.get("lora")),
            "trainable_layers": cleaned.get("trainable_layers") or 0,
        },
        "data": {"path": data_path, "limit": cleaned.get("question_limit") or 0},
        "rollout": rollout,
        "reward": {
            "params": reward_params(cleaned),
            # PPO's advantages come from the critic, so TIRESRAG's GRPO group shaping is off under PPO.
            "tiresrag_group_shaping": cleaned["algorithm"] == "grpo",
        },
        "training": {name: cleaned[name] for name in TRAINING_FIELDS},
        "ppo": {name: cleaned[name] for name in PPO_FIELDS},
        "logging": {"sample_every": cleaned["sample_every"], "samples_per_log": cleaned["samples_per_log"]},
    }
    config = config_from_dict(values).to_dict()
    check_reward_params(config["method"], config["reward"]["params"])
    return config


def check_reward_params(method: str, params: Mapping[str, Any]) -> None:
    """The method's weights, checked by scoring itself (it reads every param before it looks at the text)."""
    try:
        score(method, "", ["-"], params=params)
    except ScoringInputError as exc:
        if exc.field.startswith("params."):
            raise ConfigError(f"reward.{exc.field}", str(exc).split(": ", 1)[-1]) from None
    except ValueError:
        pass  # a verdict an empty, unjudged text lacks (TIRESRAG): the params were read and are fine
