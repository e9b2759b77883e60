"""What an experiment is asked to do, as plain values stored in ``Experiment.spec``; checked the same way whether it
comes from ``manage.py experiment`` or the browser."""

from __future__ import annotations

import copy
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from agent.judge_spec import EXPERIMENT, JudgeKind, JudgeSpec, JudgeSpecError, form_field, judge_spec_check
from trainer.config import (
    ALGORITHMS,
    BUDGETS,
    DEMO_TRAINABLE_LAYERS,
    LR_SCHEDULES,
    ROLLOUT_ENGINES,
    config_field,
    field_default,
    get_path,
    merge,
    set_path,
)
from trainer.jobs import arms
from trainer.jobs.arms import Arm
from trainer.placement import STARTABLE, Placement
from webapp.common.methods import METHOD_NAMES, evidence_judge_problem
from webapp.training.executors import ray_configured

DEFAULT_METHODS = ("search_r1", "hiprag")
DEFAULT_BASELINE = "search_r1"  # Search-R1's outcome reward: every seed paper's baseline
EVAL_ENGINES = (
    "transformers",
    "vllm",
)  # webapp.evaluation.specs.BACKEND_KINDS that run the model folder here
# The trainer config's fields an experiment sets, the same for every method (the command's options, the form's
# fields): types, defaults and help come from trainer.config.
KNOBS = (
    "training.max_steps",
    "training.seed",
    "training.learning_rate",
    "training.lr_scheduler_type",
    "training.questions_per_step",
    "training.num_generations",
    "training.dynamic_sampling",
    "training.dynamic_sampling_max_draws",
    "training.per_device_train_batch_size",
    "training.max_completion_length",
    "model.trainable_layers",
    "training.temperature",
    *BUDGETS,
    "rollout.engine",
    "logging.sample_every",
)
LR_SCHEDULE = "training.lr_scheduler_type"
LEGACY_LR_SCHEDULE = "linear"  # TRL's default, what experiments stored before the knob trained with
# Knobs the experiment names otherwise than the config (its first options, kept for scripts and stored specs).
KNOB_NAMES = {
    "training.max_steps": "steps",
    "training.per_device_train_batch_size": "batch_size",
    "rollout.engine": "rollout_engine",  # beside --eval-engine, which engine each names
}
# Where an experiment starts other than the trainer, whose defaults are the papers' (3B–7B models on GPUs).
RUN_DEFAULTS: dict[str, Any] = {
    # 1e-5, the new-run form's, moves a 135M policy within a few steps; held constant, because TRL's linear decay
    # over a short run leaves its last steps with almost no rate (docs/experiment.md, "Arms and knobs").
    "training": {"learning_rate": 1e-5, "lr_scheduler_type": "constant"},
    "model": {
        "trainable_layers": DEMO_TRAINABLE_LAYERS
    },  # the backward pass stops at SmolLM2's layer 20 of 30
    # webapp.training.forms.DEMO_ROLLOUT_TOKENS: two searches, their turns and the answer fit
    "rollout": {"max_rollout_tokens": 512},
    "logging": {"sample_every": 1},  # samples of every step: the compare page and audits can read them
}
# A trainer.config field at fault that is no knob → the experiment's option (the command's --option, the form's).
OPTION_FOR_CONFIG = {
    "method": "methods",
    "model.path": "model",
    "rollout.options": "index",
    "algorithm": "algorithm",
}


SCREEN_FIELDS = ("screen_samples", "screen_min_passes", "screen_max_passes", "screen_unscreened_share")
KNOB_CHOICES = {"training.lr_scheduler_type": LR_SCHEDULES, "rollout.engine": ROLLOUT_ENGINES}


def knob_name(path: str) -> str:
    return KNOB_NAMES.get(path, path.rsplit(".", 1)[-1])


KNOB_PATHS = {knob_name(p): p for p in KNOBS}


def knob_default(path: str) -> Any:
    return get_path(RUN_DEFAULTS, path, field_default(config_field(path)[0]))


def option_for(config_path: str) -> str:
    """The experiment option that sets a trainer config field (for an error message)."""
    if config_path in KNOBS:
        return knob_name(config_path)
    return OPTION_FOR_CONFIG.get(config_path, config_path.rsplit(".", 1)[-1])


class ExperimentConfigError(ValueError):
    """An experiment that cannot start; ``field`` names the option (or form field) at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# An experiment's judge is an agent.judge_spec.JudgeSpec of a kind offered for experiments; the heuristic by default.
JudgeChoice = JudgeSpec  # its name before the spec was agent's, kept for scripts
DEFAULT_JUDGE = JudgeKind.EVIDENCE.value


def default_judge() -> JudgeSpec:
    return JudgeSpec(kind=DEFAULT_JUDGE)


# The key in Experiment.spec that marks an experiment replayed from its spool (webapp.experiments.spool_replay), with
# the spool's name: ExperimentSpec.from_json ignores it, and such an experiment is never resumed here.
IMPORTED_FROM = "imported_from"

ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")


def parse_arm(text: str) -> Arm:
    """``name=method:key=value,…``, ``name=method`` or a bare ``method`` (:func:`trainer.jobs.arms.parse_arm`); the
    method and weights are checked by :func:`experiment_spec_check`, naming the arm."""
    try:
        return arms.parse_arm(text)
    except arms.ArmError as exc:
        raise ExperimentConfigError("arm", exc.message) from None


# The number of seed pairs, declared once: ExperimentSpec.seeds, the form's field and the command's --seeds.
SEEDS_OPTION: dict[str, Any] = {
    "label": "seed pairs",
    "min": 1,
    "max": 10,
    "help": "Train every arm once per seed (training.seed, +1, ...), the arms of a pair with the same seed; the "
    "result pools the pairs' arm − baseline differences with a two-level bootstrap (seed pairs, then questions).",
}


def spec_option(name: str) -> tuple[Any, dict[str, Any]]:
    """An ExperimentSpec field's default and its declared label, range and help (for the form and the command)."""
    declared = next(f for f in fields(ExperimentSpec) if f.name == name)
    return declared.default, dict(declared.metadata)


@dataclass(frozen=True, slots=True)
class ExperimentSpec:
    arms: tuple[Arm, ...]
    baseline: str  # an arm's name
    model: str  # the start model: a local folder, or trainer.config.TINY_MODEL (materialised once per experiment)
    train_dataset_id: int
    eval_dataset_id: int
    index_id: int
    judge: JudgeSpec = field(default_factory=default_judge)
    algorithm: str = "grpo"
    # trainer.config values every arm trains with (the KNOBS), laid over RUN_DEFAULTS.
    run: dict[str, Any] = field(default_factory=dict)
    # The screen of the training questions by the start model's pass rate (trainer.jobs.screen_rule): n samples
    # per question (0: no screen), keep those answered in min..max of them (max -1: n - 1, i.e. every question whose
    # group can hold both outcomes), plus a share of the final set drawn from the rest.
    screen_samples: int = 0
    screen_min_passes: int = 1
    screen_max_passes: int = -1
    screen_unscreened_share: float = 0.0
    eval_batch_size: int = 32
    # The evaluations' engine: "transformers", or "vllm" (`make vllm`; about 4× the rollouts per second on this
    # CPU). Training always runs on the trainer's engine; the two engines sample differently, so compare runs of one
    # engine with each other.
    eval_engine: str = "transformers"
    resamples: int = 2000
    # Where the stage runner runs (trainer.placement; webapp.experiments.runner_placement): ``local``, a subprocess of
    # the experiment's worker, or ``ray``, one job on the cluster at settings.RAY_ADDRESS; its trainers and
    # evaluations run where it runs. Stored specs from before it load as ``local``.
    executor: str = Placement.LOCAL.value
    # Seed pairs (issue 35): every arm is trained once per seed k = training.seed + i (i < seeds), the arms of a pair
    # with the same seed (same start, questions and order: they differ only in their reward weights); the result
    # pools the pairs' differences with a two-level bootstrap (scoring.seed_bootstrap). Stored specs load as 1.
    seeds: int = field(default=1, metadata=SEEDS_OPTION)

    def run_values(self) -> dict[str, Any]:
        return merge(RUN_DEFAULTS, self.run)

    def knob(self, path: str) -> Any:
        return get_path(self.run_values(), path, knob_default(path))

    @property
    def steps(self) -> int:
        return int(self.knob("training.max_steps"))

    @property
    def seed(self) -> int:
        return int(self.knob("training.seed"))

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The seed pairs' seeds: training.seed, training.seed + 1, ... (one per pair)."""
        return tuple(range(self.seed, self.seed + self.seeds))

    @property
    def screen_range(self) -> tuple[int, int]:
        """The pass counts a screened question may have, inclusive."""
        high = self.screen_samples - 1 if self.screen_max_passes < 0 else self.screen_max_passes
        return self.screen_min_passes, high

    @property
    def methods(self) -> tuple[str, ...]:
        """The arms' methods, each once, the baseline's first: the start model is evaluated in each format."""
        return tuple(dict.fromkeys(arm.method for arm in self.ordered_arms()))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExperimentSpec:
        """A stored spec; also one stored before arms (``methods``: an arm per method, named after it, trained
        under TRL's default linear decay as it was) and before ``run`` held the knobs (flat: ``steps``, ...)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        run: dict[str, Any] = copy.deepcopy(values.get("run") or {})
        for key, value in data.items():
            if key not in known and key in KNOB_PATHS:
                set_path(run, KNOB_PATHS[key], value)
        if "arms" not in data:
            values["arms"] = [{"name": m, "method": m} for m in data.get("methods", ())]
            if get_path(run, LR_SCHEDULE) is None:
                set_path(run, LR_SCHEDULE, LEGACY_LR_SCHEDULE)
        values["run"] = run
        values["arms"] = tuple(Arm(**arm) for arm in values["arms"])
        values["judge"] = JudgeSpec.from_json(values.get("judge"), default_kind=DEFAULT_JUDGE)
        return cls(**values)

    @classmethod
    def with_knobs(cls, knobs: dict[str, Any], **values: Any) -> ExperimentSpec:
        """A spec from knob values by their experiment names (``steps=4, max_turns=2``), as the command and the
        form give them; ``methods=(...)`` is shorthand for an arm per method."""
        run: dict[str, Any] = {}
        for name, value in knobs.items():
            if value not in (None, ""):  # left empty: the experiment's default
                set_path(run, KNOB_PATHS[name], value)
        if "methods" in values:
            values["arms"] = tuple(Arm(name=m, method=m) for m in values.pop("methods"))
        return cls(run=run, **values)

    def arm(self, name: str) -> Arm:
        return next(arm for arm in self.arms if arm.name == name)

    @property
    def others(self) -> tuple[Arm, ...]:
        """The arms compared with the baseline."""
        return tuple(arm for arm in self.arms if arm.name != self.baseline)

    def ordered_arms(self) -> tuple[Arm, ...]:
        """The baseline first, then the others in the order given."""
        base = [arm for arm in self.arms if arm.name == self.baseline]
        return (*base, *self.others)


def experiment_spec_check(spec: ExperimentSpec) -> None:
    """Raise :class:`ExperimentConfigError` for the first thing wrong (the trainer's own rules run later, when each
    training run's config is built)."""
    if not spec.arms:
        raise ExperimentConfigError("methods", "choose at least one method (or arm)")
    unknown = [arm.method for arm in spec.arms if arm.method not in METHOD_NAMES]
    if unknown:
        raise ExperimentConfigError(
            "methods", f"unknown method {unknown[0]!r}; known: {', '.join(METHOD_NAMES)}"
        )
    names = [arm.name for arm in spec.arms]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ExperimentConfigError("arm", f"{twice!r} is listed twice; give each arm a name of its own")
    bad = [n for n in names if not ARM_NAME.match(n)]
    if bad:
        raise ExperimentConfigError("arm", f"{bad[0]!r}: letters, digits and _.+- (at most 64)")
    if spec.baseline not in names:
        raise ExperimentConfigError(
            "baseline", f"{spec.baseline!r} is not one of the arms ({', '.join(names)})"
        )
    try:
        judge_spec_check(spec.judge, EXPERIMENT)
    except JudgeSpecError as exc:
        raise ExperimentConfigError(form_field(exc.field), exc.message) from None
    problem = evidence_judge_problem(spec.methods) if spec.judge.kind == "evidence" else None
    if problem:
        raise ExperimentConfigError("judge", problem)
    if spec.eval_engine not in EVAL_ENGINES:
        raise ExperimentConfigError("eval_engine", f"one of {', '.join(EVAL_ENGINES)}")
    if spec.executor not in STARTABLE:
        raise ExperimentConfigError("executor", f"one of {', '.join(STARTABLE)}")
    if spec.executor == Placement.RAY and not ray_configured():
        raise ExperimentConfigError("executor", "no Ray cluster is configured (set RAY_ADDRESS)")
    if spec.algorithm not in ALGORITHMS:
        raise ExperimentConfigError("algorithm", f"one of {', '.join(ALGORITHMS)}")
    for name in ("eval_batch_size", "resamples"):
        if getattr(spec, name) < 1:
            raise ExperimentConfigError(name, "at least 1")
    if spec.screen_samples < 0:
        raise ExperimentConfigError("screen_samples", "at least 0 (0: no screen)")
    low, high = spec.screen_range
    if spec.screen_samples and not 0 <= low <= high <= spec.screen_samples:
        raise ExperimentConfigError(
            "screen_min_passes", f"need 0 ≤ min ≤ max ≤ samples, got {low}..{high} of {spec.screen_samples}"
        )
    if not 0.0 <= spec.screen_unscreened_share < 1.0:
        raise ExperimentConfigError("screen_unscreened_share", "a share in [0, 1)")
    unknown_knobs = [p for p in _leaves(spec.run) if p not in KNOBS]
    if unknown_knobs:
        raise ExperimentConfigError("run", f"{unknown_knobs[0]} is not an experiment setting")
    low_seeds, high_seeds = SEEDS_OPTION["min"], SEEDS_OPTION["max"]
    if not isinstance(spec.seeds, int) or not low_seeds <= spec.seeds <= high_seeds:
        raise ExperimentConfigError("seeds", f"{low_seeds} to {high_seeds} seed pairs, got {spec.seeds!r}")
    if spec.seed < 0:
        raise ExperimentConfigError(
            "seed", "at least 0"
        )  # the bootstrap's seed too; the trainer's rules follow


def _leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in values.items():
        out += _leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return out


# The spec's own defaults (algorithm, evaluation batch, engine, resamples), for the command's --help and the form.
DEFAULTS = ExperimentSpec(
    arms=(), baseline=DEFAULT_BASELINE, model="", train_dataset_id=0, eval_dataset_id=0, index_id=0
)
