"""A training run's configuration: dataclasses with help text, read from a TOML, JSON or YAML file.

    output_dir = "var/runs/demo"
    method = "hiprag"
    algorithm = "grpo"

    [model]
    path = "var/models/SmolLM2-135M-Instruct"

    [training]
    max_steps = 20

Every section and key is optional except ``output_dir``; an unknown key, a value of the wrong type or out of range
raises :class:`ConfigError` naming the field (``training.learning_rate: must be > 0, got -1``). The defaults are
CPU-safe: float32, no gradient checkpointing, two torch threads, 4 rollouts per question, one question per step.
:meth:`RunConfig.to_dict` round-trips through JSON, so the web app can store the full config of a run.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.budgets import BUDGET_NAMES, BudgetError
from agent.judge_spec import JudgeSpecError, rollout_option_check
from scoring.scorer import METHODS as _SCORING_METHODS
from trainer.config_base import (
    ConfigError,
    field_default,
    get_path,
    load_config_values,
    merge,
    set_path,
)
from trainer.config_base import at_least as _at_least
from trainer.config_base import build as _build
from trainer.config_base import choice as _choice
from trainer.config_base import config_help as _help
from trainer.config_sections import (
    LOSS_TYPES,
    LR_SCHEDULES,
    ROLLOUT_ENGINES,
    TINY_MODEL,
    DataConfig,
    LoggingConfig,
    ModelConfig,
    PPOConfig,
    RewardConfig,
    RolloutConfig,
    TrainingConfig,
    ValidationConfig,
    VLLMConfig,
)
from trainer.placement import PLACEMENT_HELP, PLACEMENTS, Placement

METHODS = tuple(_SCORING_METHODS)  # scoring's table is the one list of methods
ALGORITHMS = ("grpo", "ppo")
# Experiment trackers a run mirrors its curves to, each kept on disk under the run's folder (trainer.trackers): the
# names are TRL's/transformers' report_to integrations.
TRACKERS = ("trackio", "mlflow", "wandb")
# The demo's and the experiments' model.trainable_layers (the warm start's too): SmolLM2's top 10 of 30 layers train,
# so the backward pass stops at layer 20: the update took 1.71x less time on a CPU (docs/benchmarks.md).
# The config's own default stays 0, every weight, as the papers train on GPUs.
DEMO_TRAINABLE_LAYERS = 10


# The rollout budgets (declared in agent.budgets; every rollout stops at the first it reaches). Forms and the
# experiment command show exactly these, so a new budget is added there and nowhere else.
BUDGETS = tuple(f"rollout.{name}" for name in BUDGET_NAMES)

# Importable from here: the sections (trainer.config_sections) and the config machinery (trainer.config_base).
__all__ = [
    "ALGORITHMS",
    "BUDGETS",
    "DEMO_TRAINABLE_LAYERS",
    "LOSS_TYPES",
    "LR_SCHEDULES",
    "METHODS",
    "ROLLOUT_ENGINES",
    "TINY_MODEL",
    "TRACKERS",
    "ConfigError",
    "DataConfig",
    "LoggingConfig",
    "ModelConfig",
    "PPOConfig",
    "RewardConfig",
    "RolloutConfig",
    "RunConfig",
    "TrainingConfig",
    "VLLMConfig",
    "ValidationConfig",
    "config_field",
    "config_from_dict",
    "describe",
    "field_default",
    "get_path",
    "leaf_paths",
    "load_config",
    "load_config_values",
    "merge",
    "set_path",
]


@dataclass
class RunConfig:
    output_dir: str = field(metadata=_help("Checkpoints, metrics.jsonl and samples.jsonl go here."))
    method: str = field(default="hiprag", metadata=_help(f"Reward method: {' | '.join(METHODS)}."))
    algorithm: str = field(default="grpo", metadata=_help(f"RL algorithm: {' | '.join(ALGORITHMS)}."))
    model: ModelConfig = field(default_factory=ModelConfig, metadata=_help("The policy."))
    data: DataConfig = field(default_factory=DataConfig, metadata=_help("Training questions."))
    rollout: RolloutConfig = field(
        default_factory=RolloutConfig, metadata=_help("How rollouts are produced.")
    )
    reward: RewardConfig = field(default_factory=RewardConfig, metadata=_help("Reward method settings."))
    training: TrainingConfig = field(default_factory=TrainingConfig, metadata=_help("Optimisation."))
    ppo: PPOConfig = field(default_factory=PPOConfig, metadata=_help("PPO only: critic and GAE."))
    logging: LoggingConfig = field(default_factory=LoggingConfig, metadata=_help("Metric and sample files."))
    vllm: VLLMConfig = field(
        default_factory=VLLMConfig, metadata=_help("rollout.engine = 'vllm' only: TRL's vLLM engine.")
    )
    validation: ValidationConfig = field(
        default_factory=ValidationConfig, metadata=_help("Held-out questions evaluated during training.")
    )
    executor: str = field(
        default=Placement.LOCAL.value,
        metadata={**_help(PLACEMENT_HELP, label="runs on"), "choices": PLACEMENTS},  # trainer.placement
    )
    trackers: list[str] = field(
        default_factory=list,
        metadata={
            **_help(
                f"Experiment trackers to mirror the run's metrics to: {' | '.join(TRACKERS)} (none by default). "
                "Each writes under the run's folder (<output_dir>/trackers/), never to a network: Trackio's local "
                "database, MLflow's file store, W&B in offline mode (wandb must be installed)."
            ),
            "choices": TRACKERS,
        },
    )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def agent_budgets(self) -> dict[str, int]:
        """agent.rollout.RolloutConfig's budgets from the ``rollout`` section: what training rolls out with, and so
        what an evaluation of the trained model should use to meet it in the same conditions."""
        values = self.rollout.rollout_values()
        values["max_rollout_tokens"] = values["max_rollout_tokens"] or self.training.max_completion_length
        return values

    def validate(self) -> RunConfig:
        """Cross-field and range checks, in this order; returns self so ``config_from_dict`` can chain it."""
        self._check_choices()
        self._check_ranges()
        self._check_rules()
        self._check_validation_and_trackers()
        self._check_engine()
        return self

    def _check_choices(self) -> None:
        """Every named choice among its options."""
        _choice("method", self.method, METHODS)
        _choice("algorithm", self.algorithm, ALGORITHMS)
        _choice("executor", self.executor, PLACEMENTS)
        _choice("model.dtype", self.model.dtype, ("float32", "bfloat16"))
        _choice("training.loss_type", self.training.loss_type, LOSS_TYPES)
        _choice("training.lr_scheduler_type", self.training.lr_scheduler_type, LR_SCHEDULES)

    def _check_ranges(self) -> None:
        """Every number in its range (the batch first follows from ``training.questions_per_step``)."""
        t = self.training
        _at_least("training.questions_per_step", t.questions_per_step, 0)
        _at_least("training.max_seconds", t.max_seconds, 0)
        if t.questions_per_step:  # the batch follows from the groups asked for (a rule, not a second setting)
            t.per_device_train_batch_size = t.questions_per_step * t.num_generations
        minimum_one: tuple[tuple[str, int], ...] = (
            ("training.max_steps", t.max_steps),
            ("training.per_device_train_batch_size", t.per_device_train_batch_size),
            ("training.gradient_accumulation_steps", t.gradient_accumulation_steps),
            ("training.num_iterations", t.num_iterations),
            ("training.max_completion_length", t.max_completion_length),
            ("training.logging_steps", t.logging_steps),
            ("model.lora_r", self.model.lora_r),
        )
        for name, count in minimum_one:
            _at_least(name, count, 1)
        minimum_zero: tuple[tuple[str, float], ...] = (
            ("training.save_steps", t.save_steps),
            ("training.dynamic_sampling_max_draws", t.dynamic_sampling_max_draws),
            ("training.dynamic_sampling_spare_groups", t.dynamic_sampling_spare_groups),
            ("training.save_total_limit", t.save_total_limit),
            ("data.limit", self.data.limit),
            ("model.torch_threads", self.model.torch_threads),
            ("model.trainable_layers", self.model.trainable_layers),
            ("logging.sample_every", self.logging.sample_every),
            ("logging.samples_per_log", self.logging.samples_per_log),
            ("training.beta", t.beta),
            ("training.epsilon", t.epsilon),
            ("ppo.cliprange_value", self.ppo.cliprange_value),
            ("ppo.vf_coef", self.ppo.vf_coef),
        )
        for name, number in minimum_zero:
            _at_least(name, number, 0)
        try:
            self.rollout.check()
        except BudgetError as exc:
            raise ConfigError(f"rollout.{exc.field}", exc.message) from None
        positive: tuple[tuple[str, float], ...] = (
            ("training.learning_rate", t.learning_rate),
            ("training.temperature", t.temperature),
            ("training.max_grad_norm", t.max_grad_norm),
            ("ppo.critic_learning_rate", self.ppo.critic_learning_rate),
        )
        for name, number in positive:
            if not number > 0:
                raise ConfigError(name, f"must be > 0, got {number!r}")
        for name, number in (("ppo.gamma", self.ppo.gamma), ("ppo.lam", self.ppo.lam)):
            if not 0.0 <= number <= 1.0:
                raise ConfigError(name, f"must lie in [0, 1], got {number!r}")
        if t.num_generations < 2:
            raise ConfigError(
                "training.num_generations", f"must be ≥ 2 (a GRPO group), got {t.num_generations}"
            )
        if t.per_device_train_batch_size % t.num_generations:
            raise ConfigError(
                "training.per_device_train_batch_size",
                f"must be a multiple of training.num_generations ({t.num_generations}), got "
                f"{t.per_device_train_batch_size}",
            )

    def _check_rules(self) -> None:
        """Settings that only hold together: the rollout's budget within the completion length, LoRA or trained
        layers, the prompt's {question}, the trainer's own reward params, GRPO-only options under PPO."""
        t = self.training
        if self.rollout.max_rollout_tokens > t.max_completion_length:
            raise ConfigError(
                "rollout.max_rollout_tokens",
                f"must be ≤ training.max_completion_length ({t.max_completion_length}), got "
                f"{self.rollout.max_rollout_tokens}",
            )
        if self.model.lora and self.model.trainable_layers:
            raise ConfigError(
                "model.trainable_layers", "must be 0 with model.lora (LoRA chooses what trains)"
            )
        if "{question}" not in self.data.prompt_template:
            raise ConfigError("data.prompt_template", "must contain {question}")
        for reserved in ("step", "total_steps"):
            if reserved in self.reward.params:
                raise ConfigError(f"reward.params.{reserved}", "is set by the trainer from its step counter")
        if self.algorithm == "ppo" and t.dynamic_sampling:
            raise ConfigError(
                "training.dynamic_sampling",
                "replaces groups without reward spread, which matter to GRPO's group-normalised advantages; "
                "PPO's advantages come from the critic: set it to false with algorithm = 'ppo'",
            )
        if self.algorithm == "ppo" and self.method == "tiresrag" and self.reward.tiresrag_group_shaping:
            raise ConfigError(
                "reward.tiresrag_group_shaping",
                "is a GRPO advantage estimator (TIRESRAG §4.4); set it to false with algorithm = 'ppo'",
            )

    def _check_validation_and_trackers(self) -> None:
        v = self.validation
        _at_least("validation.every_steps", v.every_steps, 0)
        _at_least("validation.questions", v.questions, 1)
        if v.every_steps and self.rollout.factory in ("scripted", "generate"):
            raise ConfigError(
                "validation.every_steps",
                "evaluates with the agent rollout's search engine and judge: set rollout.factory = 'agent' (or 0)",
            )
        for position, name in enumerate(self.trackers):
            _choice(f"trackers[{position}]", name, TRACKERS)
        if len(set(self.trackers)) != len(self.trackers):
            raise ConfigError("trackers", f"names a tracker twice: {self.trackers!r}")

    def _check_engine(self) -> None:
        """The rollout engine, vLLM's settings, the rollout factory and its judge."""
        _choice("rollout.engine", self.rollout.engine, ROLLOUT_ENGINES)
        _choice("vllm.mode", self.vllm.mode, ("colocate", "server"))
        _choice("vllm.dtype", self.vllm.dtype, ("auto", "float32", "bfloat16", "float16"))
        _at_least("vllm.max_model_length", self.vllm.max_model_length, 0)
        if not 0.0 < self.vllm.gpu_memory_utilization <= 1.0:
            raise ConfigError(
                "vllm.gpu_memory_utilization", f"must lie in (0, 1], got {self.vllm.gpu_memory_utilization!r}"
            )
        if self.rollout.engine == "vllm":
            if self.rollout.factory in ("scripted", "generate"):
                raise ConfigError(
                    "rollout.engine", "'vllm' generates agent rollouts: set rollout.factory = 'agent'"
                )
            if self.model.path == TINY_MODEL:
                raise ConfigError("model.path", "vLLM loads a model folder; the tiny random model has none")
        if self.rollout.factory not in ("scripted", "generate", "agent") and ":" not in self.rollout.factory:
            raise ConfigError(
                "rollout.factory",
                f"must be 'scripted', 'generate', 'agent' or 'module:function', got {self.rollout.factory!r}",
            )
        try:  # the agent rollout's judge: a kind of agent.judge_spec.KINDS offered for training, or its endpoint
            rollout_option_check(self.rollout.options.get("judge"))
        except JudgeSpecError as exc:
            where = "" if exc.field == "kind" else f"{exc.field}: "
            raise ConfigError("rollout.options.judge", where + exc.message) from None


def config_field(path: str, root: type[Any] | None = None) -> tuple[dataclasses.Field[Any], Any]:
    """The dataclass field at a dotted path (``rollout.topk``) and its type; KeyError names an unknown path."""
    cls: Any = root or RunConfig
    *sections, leaf = path.split(".")
    for name in sections:
        cls = typing.get_type_hints(cls)[name]
    found = {f.name: f for f in dataclasses.fields(cls)}
    if leaf not in found:
        raise KeyError(path)
    return found[leaf], typing.get_type_hints(cls)[leaf]


def leaf_paths(root: type[Any] | None = None, prefix: str = "") -> list[str]:
    """Every scalar field's dotted path, in declaration order."""
    cls: Any = root or RunConfig
    hints = typing.get_type_hints(cls)
    paths: list[str] = []
    for f in dataclasses.fields(cls):
        annotation = hints[f.name]
        if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
            paths += leaf_paths(annotation, f"{prefix}{f.name}.")
        else:
            paths.append(f"{prefix}{f.name}")
    return paths


def config_from_dict(values: dict[str, Any]) -> RunConfig:
    """Build and validate a :class:`RunConfig` from plain data (a parsed file, or the web app's stored JSON)."""
    config: RunConfig = _build(RunConfig, values, "")
    return config.validate()


def load_config(path: str | Path) -> RunConfig:
    """Read a ``.toml``, ``.json`` or ``.yaml``/``.yml`` file (YAML needs PyYAML, which transformers installs)."""
    return config_from_dict(load_config_values(path))


def describe(root: type[Any] | None = None) -> str:
    """Every field with its default and help text (``python -m trainer.train --help-config``)."""
    lines: list[str] = []

    def walk(cls: type[Any], prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            annotation = hints[f.name]
            if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
                lines.append(f"[{prefix}{f.name}]  {f.metadata.get('help', '')}")
                walk(annotation, f"{prefix}{f.name}.")
                continue
            default = field_default(f)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                default = "(required)"
            lines.append(f"  {prefix}{f.name} = {json.dumps(default)}  # {f.metadata.get('help', '')}")

    walk(root or RunConfig, "")
    return "\n".join(lines)
