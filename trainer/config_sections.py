"""The sections of a training run's config (:class:`trainer.config.RunConfig`), each field with its default and
help, and the choices some of them take. Importable from :mod:`trainer.config` too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.budgets import RolloutBudgets
from trainer.config_base import config_help as _help

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")  # TRL's loss aggregations
LR_SCHEDULES = ("linear", "constant", "cosine")  # transformers' SchedulerType values we offer
ROLLOUT_ENGINES = ("transformers", "vllm")
TINY_MODEL = "tiny-random"


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
    dynamic_sampling_spare_groups: int = field(
        default=1,
        metadata=_help(
            "Dynamic sampling: questions drawn beforehand and rolled out with the batch in the same call (≥ 0); "
            "their groups with spread take the flat groups' places, in order, before any sequential round is "
            "drawn, and the rest are dropped. Costs this × num_generations more rollouts a step and saves a "
            "whole rollout call when a group is flat. 1 from the H100 run's spread as sampled (0.67 and 0.83 at "
            "1 question a step); 0: the rounds alone; none when dynamic_sampling_max_draws is 0.",
            label="dynamic sampling spare groups",
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
