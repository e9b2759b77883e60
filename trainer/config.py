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
import importlib
import json
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.budgets import BUDGET_NAMES, BudgetError, RolloutBudgets
from scoring.scorer import METHODS as _SCORING_METHODS
from trainer.placement import PLACEMENT_HELP, PLACEMENTS, Placement

METHODS = tuple(_SCORING_METHODS)  # scoring's table is the one list of methods
ALGORITHMS = ("grpo", "ppo")
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")  # TRL's loss aggregations
LR_SCHEDULES = ("linear", "constant", "cosine")  # transformers' SchedulerType values we offer
ROLLOUT_ENGINES = ("transformers", "vllm")
# Experiment trackers a run mirrors its curves to, each kept on disk under the run's folder (trainer.trackers): the
# names are TRL's/transformers' report_to integrations.
TRACKERS = ("trackio", "mlflow", "wandb")
TINY_MODEL = "tiny-random"
# The demo's and the experiments' model.trainable_layers (the warm start's too): SmolLM2's top 10 of 30 layers train,
# so the backward pass stops at layer 20: the update took 1.71x less time on a CPU (docs/benchmarks.md).
# The config's own default stays 0, every weight, as the papers train on GPUs.
DEMO_TRAINABLE_LAYERS = 10


# The rollout budgets (declared in agent.budgets; every rollout stops at the first it reaches). Forms and the
# experiment command show exactly these, so a new budget is added there and nowhere else.
BUDGETS = tuple(f"rollout.{name}" for name in BUDGET_NAMES)


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range; ``field`` names it."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def _help(text: str, *, label: str = "") -> dict[str, str]:
    """A field's help text and, where a form shows it under another name, its label (webapp.common.config_form)."""
    return {"help": text, "label": label} if label else {"help": text}


@dataclass
class ModelConfig:
    path: str = field(
        default=TINY_MODEL,
        metadata=_help(
            f"A transformers model folder (e.g. var/models/SmolLM2-135M-Instruct), or {TINY_MODEL!r} for a tiny "
            "random Llama with a byte-level tokenizer (tests, benchmarks, smoke runs)."
        ),
    )
    dtype: str = field(
        default="float32", metadata=_help("float32 | bfloat16. bfloat16 needs a GPU to be fast.")
    )
    torch_threads: int = field(
        default=2,
        metadata=_help("torch.set_num_threads on the CPU (2 is fastest on a 2-core box); 0 = leave it."),
    )
    lora: bool = field(default=False, metadata=_help("Train a LoRA adapter instead of every weight."))
    trainable_layers: int = field(
        default=0,
        metadata=_help(
            "Train only the top N decoder layers and the final norm (0: every weight). Less backward compute on a "
            "CPU; not with lora."
        ),
    )
    lora_r: int = field(default=8, metadata=_help("LoRA rank."))
    lora_alpha: int = field(default=16, metadata=_help("LoRA alpha (scale = alpha / r)."))
    lora_dropout: float = field(default=0.0, metadata=_help("LoRA dropout."))
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        metadata=_help("Module names LoRA wraps."),
    )


@dataclass
class DataConfig:
    path: str = field(
        default="",
        metadata=_help(
            'FlashRAG JSONL questions: {"id", "question", "golden_answers": [...], "metadata": {"data_source"}}. '
            "Empty: a built-in set of 8 demo questions."
        ),
    )
    limit: int = field(default=0, metadata=_help("Use the first N questions (0 = all)."))
    prompt_template: str = field(
        default="{question}",
        metadata=_help(
            "The dataset's prompt column, formatted with {question}. Rollouts also get the whole row, so a rollout "
            "that builds its method's own prompt can ignore it."
        ),
    )


@dataclass
class RolloutConfig(RolloutBudgets):
    """The ``rollout`` section: the budgets (:class:`agent.budgets.RolloutBudgets`: max_turns, max_turn_tokens,
    max_rollout_tokens, max_obs_tokens, topk; 'agent' applies them all, 'generate' the turns and tokens per turn)
    and what produces the rollouts."""

    factory: str = field(
        default="scripted",
        metadata=_help(
            "'scripted' (canned trajectories of the method's format with fixed retrieved spans: tests and smoke "
            "runs), 'generate' (the policy writes each turn, a fixed fake search answers), 'agent' (agent/'s real "
            "rollout loop and judges against a retrieval index; see trainer.agent_rollout), or 'module:function' "
            "taking (RunConfig, model, tokenizer) and returning a trainer.rollout.RolloutFn."
        ),
    )
    options: dict[str, Any] = field(
        default_factory=dict, metadata=_help("Free-form options passed to a custom rollout factory.")
    )
    engine: str = field(
        default="transformers",
        metadata=_help(
            "What generates the 'agent' rollouts: 'transformers' (the policy itself, in this process) or 'vllm' "
            "(the trainer's own vLLM engine, TRL's use_vllm: weights synced before each rollout batch, sampled "
            "log-probs fed to TRL's importance-sampling correction; needs .venv-vllm or a GPU vLLM, see the "
            "[vllm] section and docs/vllm.md)."
        ),
    )


@dataclass
class RewardConfig:
    params: dict[str, Any] = field(
        default_factory=dict,
        metadata=_help(
            "The method's weights as scoring.scorer.score takes them (e.g. hiprag: lambda_f, lambda_p, process). "
            "TIRESRAG's step/total_steps come from the trainer and may not be set here."
        ),
    )
    token_level: bool = field(
        default=True,
        metadata=_help(
            "AutoSearch: place each step's reward on the last token of its turn (GRPO: DeepSeekMath process "
            "supervision; PPO: rewards at step ends, then GAE). False: the trajectory total as one outcome reward."
        ),
    )
    tiresrag_group_shaping: bool = field(
        default=True,
        metadata=_help(
            "TIRESRAG under GRPO: group filter, consistency penalty and difficulty weight (paper §4.4) replace "
            "the plain group-normalised advantage. Must be false under PPO (advantages come from the critic)."
        ),
    )


@dataclass
class TrainingConfig:
    max_steps: int = field(default=10, metadata=_help("Optimizer steps."))
    max_seconds: float = field(
        default=0.0,
        metadata=_help(
            "A wall-clock budget for training (0: none): the step that ends past it is the last, and the model is "
            "saved as after max_steps. For a leased machine, so a run cut short still leaves a model to evaluate.",
            label="time budget (s)",
        ),
    )
    stop_file: str = field(
        default="",
        metadata=_help(
            "A file read at every step's end (empty: none): once it holds a step number N, the run ends at step N "
            "(or at the step now ending, if later) and saves the model, as after max_steps. Arms trained side by "
            "side stop at the same step this way when their time runs out.",
            label="stop file",
        ),
    )
    learning_rate: float = field(default=1e-6, metadata=_help("Policy learning rate (AdamW)."))
    lr_scheduler_type: str = field(
        default="linear",
        metadata=_help(
            f"TRL's learning-rate schedule: {' | '.join(LR_SCHEDULES)}. 'linear' decays to 0 at max_steps, so a "
            "4-step run at 1e-5 moves the weights by 2.5e-5 of rate in all; 'constant' keeps the rate for every "
            "step, what a short run needs to move at all.",
            label="learning-rate schedule",
        ),
    )
    questions_per_step: int = field(
        default=0,
        metadata=_help(
            "Questions (GRPO groups) per optimizer step; set, it makes per_device_train_batch_size = "
            "questions_per_step × num_generations. 0: per_device_train_batch_size decides. More groups a step "
            "give the process term more chances to meet a group with reward spread.",
            label="questions per step",
        ),
    )
    per_device_train_batch_size: int = field(
        default=8,
        metadata=_help(
            "Completions per micro-batch, a multiple of num_generations: 8 of 4 is 2 questions per step."
        ),
    )
    num_generations: int = field(default=4, metadata=_help("Rollouts per question (the GRPO group, ≥ 2)."))
    dynamic_sampling: bool = field(
        default=False,
        metadata=_help(
            "DAPO's dynamic sampling (GRPO only): a group whose rewards are all equal has zero advantage and gives "
            "no gradient, so it is replaced by the group of a question drawn from the rest of the training set "
            "when that group's rewards differ. Costs num_generations extra rollouts per question drawn; off, every "
            "group is trained as sampled (trainer.dynamic_sampling).",
            label="dynamic sampling (DAPO)",
        ),
    )
    dynamic_sampling_max_draws: int = field(
        default=2,
        metadata=_help(
            "Dynamic sampling: rounds of replacement questions a step may draw, one per group still without "
            "spread, before it trains on what it has. At most this × questions per step × num_generations "
            "extra rollouts a step; 0 draws none and only measures groups/spread_rate_before.",
            label="dynamic sampling rounds",
        ),
    )
    gradient_accumulation_steps: int = field(default=1, metadata=_help("Micro-batches per optimizer step."))
    num_iterations: int = field(
        default=1, metadata=_help("Optimisation passes over each generated batch (μ).")
    )
    max_completion_length: int = field(
        default=512, metadata=_help("Completion tokens, model and retrieved (rollouts must respect it).")
    )
    beta: float = field(
        default=0.0, metadata=_help("KL coefficient against the reference model (0: no ref).")
    )
    epsilon: float = field(default=0.2, metadata=_help("PPO-clip range of the policy ratio."))
    temperature: float = field(
        default=1.0, metadata=_help("Sampling temperature (also scales training logits).")
    )
    loss_type: str = field(
        default="grpo", metadata=_help("TRL loss aggregation: grpo | bnpo | dr_grpo | dapo.")
    )
    max_grad_norm: float = field(default=1.0, metadata=_help("Gradient clipping."))
    logging_steps: int = field(default=1, metadata=_help("Log (and write metrics.jsonl) every N steps."))
    save_steps: int = field(default=0, metadata=_help("Checkpoint every N steps (0: only the final model)."))
    save_total_limit: int = field(default=2, metadata=_help("Checkpoints kept."))
    resume_from_checkpoint: str = field(
        default="",
        metadata=_help("A checkpoint folder, 'latest' (newest under output_dir), or '' (fresh start)."),
    )
    gradient_checkpointing: bool = field(default=False, metadata=_help("Trade compute for memory."))
    seed: int = field(default=0, metadata=_help("Seed of torch, data order and sampling."))


@dataclass
class PPOConfig:
    gamma: float = field(default=1.0, metadata=_help("GAE discount γ (per policy token)."))
    lam: float = field(default=1.0, metadata=_help("GAE λ."))
    cliprange_value: float = field(
        default=0.2, metadata=_help("Clip of the value update around the old value.")
    )
    vf_coef: float = field(default=1.0, metadata=_help("Scale of the critic's loss."))
    critic_learning_rate: float = field(default=1e-5, metadata=_help("Critic learning rate (AdamW)."))
    critic_model: str = field(
        default="",
        metadata=_help("A separate model folder for the critic's backbone; empty: a copy of the policy's."),
    )
    whiten_advantages: bool = field(default=True, metadata=_help("Normalise advantages over policy tokens."))


@dataclass
class VLLMConfig:
    mode: str = field(
        default="colocate",
        metadata=_help(
            "rollout.engine = 'vllm' only. 'colocate': vLLM in the training process, sharing its device (TRL's "
            "vllm_mode); 'server': a separate `trl vllm-serve` at server_base_url (weights pushed over NCCL)."
        ),
    )
    gpu_memory_utilization: float = field(
        default=0.25,
        metadata=_help(
            "Colocate: the device's memory fraction vLLM may take (on a CPU: of the machine's RAM)."
        ),
    )
    max_model_length: int = field(
        default=0, metadata=_help("Colocate: vLLM's max_model_len (prompt + completion); 0: the model's own.")
    )
    dtype: str = field(
        default="auto",
        metadata=_help(
            "Colocate: the engine's dtype. 'auto': float32 on a CPU (vLLM would run a float32 checkpoint in "
            "bfloat16, 4× slower on AVX2), vLLM's own choice on a GPU; or float32 | bfloat16 | float16."
        ),
    )
    enable_sleep_mode: bool = field(
        default=False,
        metadata=_help("Colocate on a GPU: offload vLLM's weights and KV cache between rollouts."),
    )
    server_base_url: str = field(
        default="", metadata=_help("Server mode: the `trl vllm-serve` URL (empty: http://127.0.0.1:8000).")
    )
    importance_sampling_correction: bool = field(
        default=True,
        metadata=_help(
            "Correct the policy loss for vLLM's sampling/training mismatch with the log-probs vLLM sampled with "
            "(TRL's truncated importance sampling); environment tokens are masked out of it."
        ),
    )


@dataclass
class LoggingConfig:
    sample_every: int = field(
        default=10, metadata=_help("Write sample trajectories to samples.jsonl every N steps (0: never).")
    )
    samples_per_log: int = field(default=4, metadata=_help("Trajectories written each time."))


@dataclass
class ValidationConfig:
    every_steps: int = field(
        default=0,
        metadata=_help(
            "Evaluate the held-out questions every N optimizer steps (and at the last step): greedy, at the run's "
            "budgets, with the rollout's search engine and judge (agent.evaluate), reported as val/cem, val/acc, "
            "val/average_searches, val/osr … beside the training curves. 0: never. Needs rollout.factory = "
            "'agent' (or a factory whose rollout has a searcher).",
            label="validate every N steps",
        ),
    )
    path: str = field(
        default="",
        metadata=_help(
            "FlashRAG JSONL of the held-out questions. Empty: the last validation.questions questions of the "
            "training data are held out of training (only while every_steps > 0)."
        ),
    )
    questions: int = field(
        default=16,
        metadata=_help(
            "Validation questions: the first N of validation.path, or N held out of the training data. Each costs "
            "one greedy rollout (and its judge calls) per validation.",
            label="validation questions",
        ),
    )


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
        """Cross-field and range checks; returns self so ``config_from_dict`` can chain it."""
        _choice("method", self.method, METHODS)
        _choice("algorithm", self.algorithm, ALGORITHMS)
        _choice("executor", self.executor, PLACEMENTS)
        _choice("model.dtype", self.model.dtype, ("float32", "bfloat16"))
        _choice("training.loss_type", self.training.loss_type, LOSS_TYPES)
        _choice("training.lr_scheduler_type", self.training.lr_scheduler_type, LR_SCHEDULES)
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
        return self


def _choice(name: str, value: str, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ConfigError(name, f"must be one of {', '.join(options)}, got {value!r}")


def _at_least(name: str, value: float, low: float) -> None:
    if value < low:
        raise ConfigError(name, f"must be ≥ {low}, got {value!r}")


def _convert(name: str, annotation: Any, value: Any) -> Any:
    """Check one JSON/TOML value against a field's annotation (int, float, bool, str, list[str], dict, dataclass)."""
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if not isinstance(value, dict):
            raise ConfigError(name, f"must be a table/object, got {value!r}")
        return _build(annotation, value, f"{name}.")
    origin = typing.get_origin(annotation)
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(name, f"must be true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(name, f"must be an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(name, f"must be a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(name, f"must be a string, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(name, f"must be a list of strings, got {value!r}")
        return list(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(name, f"must be a table/object, got {value!r}")
        return dict(value)
    raise ConfigError(name, f"unsupported field type {annotation!r}")  # pragma: no cover


def _build(cls: type[Any], values: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}", f"unknown key; expected one of {', '.join(fields)}")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in values:
            kwargs[name] = _convert(f"{prefix}{name}", hints[name], values[name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{name}", "is required")
    return cls(**kwargs)


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


def field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


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


def set_path(values: dict[str, Any], path: str, value: Any) -> None:
    """``values["a"]["b"] = value`` for ``a.b``, making the sections on the way."""
    *sections, leaf = path.split(".")
    for name in sections:
        values = values.setdefault(name, {})
    values[leaf] = value


def get_path(values: dict[str, Any], path: str, default: Any = None) -> Any:
    *sections, leaf = path.split(".")
    for name in sections:
        values = values.get(name) or {}
    return values.get(leaf, default)


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` laid over it section by section (neither is changed)."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in ("options", "params"):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def config_from_dict(values: dict[str, Any]) -> RunConfig:
    """Build and validate a :class:`RunConfig` from plain data (a parsed file, or the web app's stored JSON)."""
    config: RunConfig = _build(RunConfig, values, "")
    return config.validate()


def load_config(path: str | Path) -> RunConfig:
    """Read a ``.toml``, ``.json`` or ``.yaml``/``.yml`` file (YAML needs PyYAML, which transformers installs)."""
    return config_from_dict(load_config_values(path))


def load_config_values(path: str | Path) -> dict[str, Any]:
    """The top-level table of a ``.toml``, ``.json`` or ``.yaml`` config file; errors name the file."""
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError("CONFIG", f"cannot read {path}: {exc.strerror}") from None
    try:
        if suffix == ".toml":
            values = tomllib.loads(raw.decode())
        elif suffix == ".json":
            values = json.loads(raw)
        elif suffix in (".yaml", ".yml"):
            values = importlib.import_module("yaml").safe_load(raw)
        else:
            raise ConfigError("CONFIG", f"{path.name}: use a .toml, .json or .yaml file")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("CONFIG", f"{path.name} is not valid {suffix[1:].upper()}: {exc}") from None
    except ImportError:
        raise ConfigError("CONFIG", "YAML needs PyYAML; use a .toml or .json file") from None
    except Exception as exc:  # PyYAML's own errors (no stubs to name the class)
        if type(exc).__module__.startswith("yaml"):
            raise ConfigError("CONFIG", f"{path.name} is not valid YAML: {exc}") from None
        raise
    if not isinstance(values, dict):
        raise ConfigError("CONFIG", f"{path.name} must hold a table/object at the top level")
    return values


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
