"""A warm start's configuration (:class:`WarmStartConfig`), read from the same TOML/JSON/YAML files as a training
run's and checked field by field (:class:`trainer.config.ConfigError` names the field). ``python -m trainer.warm_start
--help-config`` lists every field; every name here is importable from :mod:`trainer.warm_start` too."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.budgets import BudgetError, RolloutBudgets, budget_field
from trainer.config import METHODS
from trainer.config_base import ConfigError, build
from trainer.config_base import config_help as _help

ALL_METHODS = list(METHODS)


@dataclass
class WarmStartModel:
    path: str = field(default="", metadata=_help("The base policy: a transformers model folder."))
    torch_threads: int = field(default=2, metadata=_help("torch threads on the CPU (2 on a 2-core box)."))


@dataclass
class WarmStartData:
    path: str = field(
        default="",
        metadata=_help(
            "FlashRAG questions whose metadata has supporting_titles (e.g. wiki_multihop's questions.jsonl)."
        ),
    )
    split: str = field(
        default="train",
        metadata=_help(
            "Use rows whose metadata.split starts with this ('' = all); keep evaluation questions out."
        ),
    )
    questions_per_method: int = field(default=48, metadata=_help("Search demonstrations per method."))
    no_search_share: float = field(
        default=0.15,
        metadata=_help(
            "Share of no-search demonstrations (single-hop common knowledge: the file's own rows so marked, "
            "plus demo/common_knowledge.jsonl)."
        ),
    )
    redundant_search_share: float = field(
        default=0.0,
        metadata=_help(
            "Share of search demonstrations given one redundant search after the needed ones (repeating the first "
            "query, or asking for what the first passage already gave): the controlled test of a process reward. "
            "Needs max_turns ≥ hops + 2 and a run budget with room for the extra search (max_rollout_tokens)."
        ),
    )


@dataclass
class WarmStartTraining:
    epochs: float = field(default=3.0, metadata=_help("Passes over the demonstrations."))
    learning_rate: float = field(
        default=3e-4,
        metadata=_help(
            "AdamW learning rate. The alignment-handbook's SFT recipe for SmolLM2-135M/360M uses 1e-3 (3e-4 noted "
            "beside it); 8e-5 left the demo model looping after 20 steps (docs/warm_start.md)."
        ),
    )
    batch_size: int = field(default=4, metadata=_help("Demonstrations per micro-batch."))
    gradient_accumulation_steps: int = field(default=2, metadata=_help("Micro-batches per optimizer step."))
    max_length: int = field(
        default=1024, metadata=_help("Tokens per demonstration (longer ones are dropped).")
    )
    seed: int = field(default=0, metadata=_help("Seed of the question sample, data order and torch."))
    trainable_layers: int = field(
        default=10,
        metadata=_help(
            "Train only the top N transformer layers and the final norm (0: every weight). The format is learnt in "
            "the top layers; the backward pass then stops there, about 1.8× less compute on a CPU."
        ),
    )
    cache_frozen_layers: bool = field(
        default=True,
        metadata=_help(
            "With trainable_layers: run the frozen bottom layers once per demonstration and train the top ones on "
            "their stored output, the LM head only where the loss is (the model's own tokens). The same updates "
            "as TRL's SFTTrainer over the whole model (false), for a fraction of the compute (docs/warm_start.md)."
        ),
    )


@dataclass(kw_only=True)
class WarmStartConfig(RolloutBudgets):
    """A warm start: its budgets (:class:`agent.budgets.RolloutBudgets`, top-level keys ``max_turns`` …, as the
    runs it prepares will use them), the base model, the questions and the supervised training."""

    output_dir: str = field(metadata=_help("The warm-started model and its files go here."))
    index: str = field(default="", metadata=_help("The retrieval index folder the demonstrations search."))
    methods: list[str] = field(
        default_factory=lambda: list(ALL_METHODS), metadata=_help("The formats to teach (one model for all).")
    )
    # The budgets of the runs this warm start prepares (agent.budgets.RolloutBudgets): the demonstrations search
    # with max_obs_tokens and topk, fewer times than max_turns (the answer needs a turn), and one with a model turn
    # over max_turn_tokens is left out (the runs' budget would cut it).
    max_rollout_tokens: int = field(
        default=512,
        metadata={
            **budget_field("max_rollout_tokens").metadata,
            "help": "Tokens per rollout of the runs this warm start prepares (the demo's: 512). Checked, with a "
            "redundant search, to leave room for one search more (agent.rollout.room_for_another_search): 764 at "
            "the demo's 64 tokens per turn and 100 retrieved tokens; give the runs the same budget.",
        },
    )
    model: WarmStartModel = field(default_factory=WarmStartModel)
    data: WarmStartData = field(default_factory=WarmStartData)
    training: WarmStartTraining = field(default_factory=WarmStartTraining)
    demo_recipe: int = field(
        default=0,
        metadata=_help(
            "The demo's warm model only: its recipe (trainer.warm_start.DEMO_RECIPE), written into warm_start.json "
            "so an older one is rebuilt (0: not the demo's)."
        ),
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def validate(self) -> WarmStartConfig:
        if not self.model.path:
            raise ConfigError("model.path", "is required (the base policy folder)")
        if not self.index:
            raise ConfigError("index", "is required (the demonstrations search a real index)")
        if not self.data.path:
            raise ConfigError("data.path", "is required (questions with metadata.supporting_titles)")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ConfigError(
                "methods", f"must be a non-empty list of {', '.join(METHODS)}; got {self.methods!r}"
            )
        if not 0.0 <= self.data.redundant_search_share <= 1.0:
            raise ConfigError(
                "data.redundant_search_share", f"must lie in [0, 1], got {self.data.redundant_search_share!r}"
            )
        if self.data.redundant_search_share:
            if self.max_turns < 4:
                raise ConfigError(
                    "max_turns",
                    f"must be ≥ 4 with redundant searches (two needed searches, the redundant one, the answer); got "
                    f"{self.max_turns}",
                )
            need = rollout_tokens_for(3, self.max_turn_tokens, self.max_obs_tokens)
            if self.max_rollout_tokens < need:
                raise ConfigError(
                    "max_rollout_tokens",
                    f"must be ≥ {need} with redundant searches: at {self.max_rollout_tokens} tokens a rollout, "
                    "agent.rollout.room_for_another_search sends a rollout to its answer before a third search "
                    "(give the runs this budget too)",
                )
        if not 0.0 <= self.data.no_search_share < 1.0:
            raise ConfigError(
                "data.no_search_share", f"must lie in [0, 1), got {self.data.no_search_share!r}"
            )
        try:
            self.check()
        except BudgetError as exc:
            raise ConfigError(exc.field, exc.message) from None
        for name, value in (
            ("data.questions_per_method", self.data.questions_per_method),
            ("training.batch_size", self.training.batch_size),
            ("training.gradient_accumulation_steps", self.training.gradient_accumulation_steps),
            ("training.max_length", self.training.max_length),
            ("max_turns", self.max_turns),  # a demonstration's searches leave its answer a turn
        ):
            if value < 1:
                raise ConfigError(name, f"must be ≥ 1, got {value!r}")
        for name, number in (
            ("training.epochs", self.training.epochs),
            ("training.learning_rate", self.training.learning_rate),
        ):
            if not number > 0:
                raise ConfigError(name, f"must be > 0, got {number!r}")
        return self


def rollout_tokens_for(searches: int, max_turn_tokens: int, max_obs_tokens: int) -> int:
    """The tokens per rollout with which ``agent.rollout.room_for_another_search`` lets every method make
    ``searches`` searches even when each model turn fills its budget: before each search after the first, what is
    left must hold a full turn, the passages and their wrapper, the turn after it and an answer; each search before
    spends a turn, its passages and a conclusion turn (HiPRAG's step)."""
    from agent.rollout import ANSWER_TOKENS, SEARCH_WRAPPER_TOKENS

    step = 2 * max_turn_tokens + max_obs_tokens + SEARCH_WRAPPER_TOKENS
    return searches * step + ANSWER_TOKENS


def check_inputs(config: WarmStartConfig) -> None:
    """The files a run reads exist (checked when it starts: the web app validates a config before its question file
    is exported)."""
    if not Path(config.data.path).is_file():
        raise ConfigError("data.path", f"{config.data.path} is not a file")
    if not Path(config.index).is_dir():
        raise ConfigError(
            "index", f"{config.index} is not an index folder (retrieval.index.build_index makes one)"
        )


def warm_start_config(values: dict[str, Any]) -> WarmStartConfig:
    config: WarmStartConfig = build(WarmStartConfig, values, "")
    return config.validate()


def load_warm_start_config(path: str | Path) -> WarmStartConfig:
    from trainer.config import load_config_values

    return warm_start_config(load_config_values(path))


# --- training --------------------------------------------------------------------------------------------------
