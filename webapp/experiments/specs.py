"""What an experiment is asked to do, as plain values stored in ``Experiment.spec``; checked the same way whether it
comes from ``manage.py experiment`` or the browser."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from trainer.config import ALGORITHMS, DEMO_TRAINABLE_LAYERS, RolloutConfig, TrainingConfig
from webapp.runs.models import Method

DEFAULT_METHODS = ("search_r1", "hiprag")
DEFAULT_BASELINE = "search_r1"  # Search-R1's outcome reward: every seed paper's baseline
JUDGE_KINDS = ("evidence", "none", "policy", "openai")
EVAL_ENGINES = (
    "transformers",
    "vllm",
)  # webapp.evaluation.specs.BACKEND_KINDS that run the model folder here
# Methods whose process reward the evidence judge can serve (its detectors are HiPRAG's); Search-R1 needs no judge.
EVIDENCE_METHODS = ("search_r1", "hiprag")
LLM_JUDGE_METHODS = ("search_p1", "tiresrag")
DEFAULT_ROLLOUT_TOKENS = (
    512  # webapp.training.forms.DEMO_ROLLOUT_TOKENS: two searches, their turns and the answer fit
)
DEFAULT_LEARNING_RATE = 1e-5  # the new-run form's: moves a 135M policy within a few steps
DEFAULT_TRAINABLE_LAYERS = DEMO_TRAINABLE_LAYERS  # the backward pass stops at SmolLM2's layer 20 of 30
_R, _T = RolloutConfig(), TrainingConfig()
# A trainer.config field at fault → the experiment's option (the command's --option, the form's field).
CONFIG_FIELDS = {
    "training.max_steps": "steps",
    "training.seed": "seed",
    "training.learning_rate": "learning_rate",
    "training.num_generations": "num_generations",
    "training.per_device_train_batch_size": "batch_size",
    "training.max_completion_length": "max_completion_length",
    "training.temperature": "temperature",
    "model.trainable_layers": "trainable_layers",
    "model.path": "model",
    "method": "methods",
    "algorithm": "algorithm",
    "rollout.max_turns": "max_turns",
    "rollout.max_turn_tokens": "max_turn_tokens",
    "rollout.max_rollout_tokens": "max_rollout_tokens",
    "rollout.max_obs_tokens": "max_obs_tokens",
    "rollout.topk": "topk",
    "rollout.options": "index",
    "logging.sample_every": "sample_every",
}


class ExperimentConfigError(ValueError):
    """An experiment that cannot start; ``field`` names the option (or form field) at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class JudgeChoice:
    """``evidence`` (the heuristic, no LLM), ``none``, ``policy`` (the policy judges itself) or ``openai`` (an
    OpenAI-compatible endpoint at ``base_url`` serving ``model``; its key in the variable NAMED ``api_key_env``)."""

    kind: str = "evidence"
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""

    @property
    def label(self) -> str:
        if self.kind == "evidence":
            return "evidence — heuristic (scoring.judging.evidence, no LLM)"
        if self.kind == "openai":
            return f"{self.model} at {self.base_url}"
        return self.kind


@dataclass(frozen=True, slots=True)
class ExperimentSpec:
    methods: tuple[str, ...]
    baseline: str
    model: str  # the start model: a local folder, or trainer.config.TINY_MODEL (materialised once per experiment)
    train_dataset_id: int
    eval_dataset_id: int
    index_id: int
    judge: JudgeChoice = field(default_factory=JudgeChoice)
    steps: int = _T.max_steps
    seed: int = 0
    algorithm: str = "grpo"
    learning_rate: float = DEFAULT_LEARNING_RATE
    num_generations: int = _T.num_generations
    batch_size: int = _T.per_device_train_batch_size  # rollouts per step (batch / generations questions)
    max_completion_length: int = _T.max_completion_length
    trainable_layers: int = DEFAULT_TRAINABLE_LAYERS
    temperature: float = _T.temperature
    max_turns: int = _R.max_turns
    max_turn_tokens: int = _R.max_turn_tokens
    max_rollout_tokens: int = DEFAULT_ROLLOUT_TOKENS
    max_obs_tokens: int = _R.max_obs_tokens
    topk: int = _R.topk
    sample_every: int = 1  # samples of every step: the compare page and audits can read them
    eval_batch_size: int = 32
    # The evaluations' engine: "transformers", or "vllm" (`make vllm`; about 4× the rollouts per second on this
    # CPU). Training always runs on the trainer's engine; the two engines sample differently, so compare runs of one
    # engine with each other.
    eval_engine: str = "transformers"
    resamples: int = 2000

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["methods"] = list(self.methods)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExperimentSpec:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["methods"] = tuple(values.get("methods", ()))
        values["judge"] = JudgeChoice(**values.get("judge", {}))
        return cls(**values)

    @property
    def others(self) -> tuple[str, ...]:
        """The methods compared with the baseline."""
        return tuple(m for m in self.methods if m != self.baseline)

    def ordered_methods(self) -> tuple[str, ...]:
        """The baseline first, then the others in the order given."""
        return (self.baseline, *self.others)


def experiment_spec_check(spec: ExperimentSpec) -> None:
    """Raise :class:`ExperimentConfigError` for the first thing wrong (the trainer's own rules run later, when each
    training run's config is built)."""
    if not spec.methods:
        raise ExperimentConfigError("methods", "choose at least one method")
    unknown = [m for m in spec.methods if m not in Method.values]
    if unknown:
        raise ExperimentConfigError(
            "methods", f"unknown method {unknown[0]!r}; known: {', '.join(Method.values)}"
        )
    if len(set(spec.methods)) != len(spec.methods):
        raise ExperimentConfigError("methods", "a method is listed twice")
    if spec.baseline not in spec.methods:
        raise ExperimentConfigError("baseline", f"{spec.baseline!r} is not one of the methods")
    if spec.judge.kind not in JUDGE_KINDS:
        raise ExperimentConfigError("judge", f"one of {', '.join(JUDGE_KINDS)} (or an http(s):// URL)")
    if spec.judge.kind == "openai" and not (spec.judge.base_url and spec.judge.model):
        raise ExperimentConfigError("judge_model", "an endpoint judge needs its base URL and its model name")
    if spec.judge.kind == "evidence":
        needs_llm = [m for m in spec.methods if m in LLM_JUDGE_METHODS]
        if needs_llm:
            raise ExperimentConfigError(
                "judge",
                f"the evidence judge implements HiPRAG's detectors only; {', '.join(needs_llm)} needs an LLM judge",
            )
    if spec.eval_engine not in EVAL_ENGINES:
        raise ExperimentConfigError("eval_engine", f"one of {', '.join(EVAL_ENGINES)}")
    if spec.algorithm not in ALGORITHMS:
        raise ExperimentConfigError("algorithm", f"one of {', '.join(ALGORITHMS)}")
    for name in ("steps", "num_generations", "batch_size", "eval_batch_size", "resamples", "topk"):
        if getattr(spec, name) < 1:
            raise ExperimentConfigError(name, "at least 1")
    if spec.seed < 0:
        raise ExperimentConfigError("seed", "at least 0")
