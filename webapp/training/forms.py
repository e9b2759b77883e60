"""The new training run form. Ranges and cross-field rules are trainer.config's (see webapp.training.config)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings

from agent.judge_spec import TRAIN
from trainer.config import (
    ALGORITHMS,
    BUDGETS,
    DEMO_TRAINABLE_LAYERS,
    LOSS_TYPES,
    LR_SCHEDULES,
    TINY_MODEL,
    ConfigError,
    RunConfig,
    TrainingConfig,
)
from trainer.warm_start import WarmStartConfig, warm_start_config
from webapp.common.config_form import (
    config_form_class,
    config_form_field,
    config_values,
    error_field,
    form_name,
)
from webapp.common.fieldsets import FieldsetsMixin
from webapp.common.judge_options import JudgeEndpointFields, judge_field
from webapp.common.methods import METHOD_CHOICES, evidence_judge_problem, weight_help
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.training import model_checks
from webapp.training.config import default_model_path, run_config, warm_start_values

DEMO_TRAIN_DATASET = "demo_multihop"  # webapp.imports.services_demo
# Two searches of ~100 retrieved tokens, their turns and the answer fit (agent.rollout.room_for_another_search
# asks for the answer when a third would not); 384 cut most of the warm model's rollouts before their answer.
DEMO_ROLLOUT_TOKENS = TrainingConfig().max_completion_length
TRAINING_PATHS = tuple(
    f"training.{name}"
    for name in (
        "max_steps",
        "learning_rate",
        "lr_scheduler_type",
        "questions_per_step",
        "num_generations",
        "dynamic_sampling",
        "dynamic_sampling_max_draws",
        "dynamic_sampling_spare_groups",
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
)
PPO_PATHS = ("ppo.critic_learning_rate", "ppo.gamma", "ppo.lam", "ppo.vf_coef")
# Validation during training (off unless asked: each validation is a greedy rollout per held-out question) and the
# experiment trackers (none unless ticked).
VALIDATION_PATHS = ("validation.every_steps", "validation.questions", "trackers")
# Where the new-run form starts other than the trainer: a 135M policy on a CPU (the trainer's defaults are papers').
FORM_DEFAULTS: dict[str, dict[str, object]] = {
    "training.learning_rate": {
        "initial": 1e-5,
        "help_text": "1e-5 moves a 135M policy within a few steps; the papers use 1e-6 for 3B–7B.",
    },
    "training.loss_type": {"choices": LOSS_TYPES},
    "training.lr_scheduler_type": {"choices": LR_SCHEDULES, "required": False},
    "training.questions_per_step": {"required": False, "min_value": 0},
    "training.dynamic_sampling_max_draws": {"required": False, "min_value": 0},
    "training.dynamic_sampling_spare_groups": {"required": False, "min_value": 0},
    "training.seed": {"min_value": 0},
    "rollout.max_rollout_tokens": {"initial": DEMO_ROLLOUT_TOKENS},
    **{path: {"label": f"{path.rsplit('.', 1)[-1].replace('_', ' ')} (PPO)"} for path in PPO_PATHS},
    "validation.every_steps": {"required": False, "min_value": 0},
    "validation.questions": {"required": False, "min_value": 1},
}
BUDGET_NAMES = tuple(form_name(p) for p in BUDGETS)
TRAINING_NAMES = tuple(form_name(p) for p in TRAINING_PATHS)
PPO_NAMES = tuple(form_name(p) for p in PPO_PATHS)
VALIDATION_NAMES = tuple(form_name(p) for p in VALIDATION_PATHS)
# A ConfigError's field that no config-derived form field shows → the form field that does.
ERROR_FIELDS = {
    "data.path": "dataset",
    "rollout.options.judge": "judge",  # before its section's entry: the first prefix that matches wins
    "rollout.options": "index",
    "reward.tiresrag_group_shaping": "algorithm",
    "reward.params": "reward_params",
}

# Every budget is optional on the form: left empty, the trainer's default applies.
_ConfigFields = config_form_class(
    "_ConfigFields",
    (*TRAINING_PATHS, *BUDGETS, *PPO_PATHS, *VALIDATION_PATHS),
    {**FORM_DEFAULTS, **{p: {"required": False, **FORM_DEFAULTS.get(p, {})} for p in BUDGETS}},
)


class OptionalJSONField(forms.JSONField):
    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)  # an empty box, not "null"


class TrainingRunForm(FieldsetsMixin, JudgeEndpointFields, _ConfigFields):
    """The fields named after a trainer.config field are derived from it (webapp.common.config_form)."""

    name = forms.CharField(max_length=200, initial="hiprag-grpo")
    method = config_form_field("method", choices=METHOD_CHOICES, help_text="The reward method.")
    algorithm = config_form_field("algorithm", choices=[(a, a.upper()) for a in ALGORITHMS], help_text="")
    model_path = config_form_field(
        "model.path",
        label="policy model",
        max_length=1000,
        widget=forms.TextInput(attrs={"list": "known-models"}),
        help_text=f"A transformers model folder on the train worker, or {TINY_MODEL!r} (a tiny random model for "
        "smoke runs). Default: SmolLM2-135M-Instruct from `python -m agent.setup_model` when present.",
    )
    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.order_by("name"),
        required=False,
        empty_label="built-in demo questions (8)",
    )
    question_limit = config_form_field(
        "data.limit", min_value=0, help_text="Train on the first N questions; 0: all."
    )
    rollout = config_form_field(
        "rollout.factory",
        choices=(
            ("agent", "agent — the method's real rollout loop against the index"),
            ("scripted", "scripted — canned trajectories, no index needed"),
            ("generate", "generate — the policy writes turns, a fixed fake search answers"),
        ),
        help_text="'agent' needs a ready index; without one, 'scripted' is the default (a smoke run of the trainer).",
    )
    index = forms.ModelChoiceField(
        queryset=Index.objects.filter(status=Index.Status.READY).select_related("corpus").order_by("name"),
        required=False,
        empty_label="none",
        help_text="The retrieval index the agent rollout searches (only ready indexes are listed).",
    )
    judge = judge_field(  # agent.judge_spec.KINDS
        TRAIN,
        initial="none",
        help_text="The step/answer judge of the agent rollout (HiPRAG's over/under-search detector, …).",
    )
    lambda_f = forms.FloatField(required=False, label="Format weight λf", help_text=weight_help("lambda_f"))
    lambda_p = forms.FloatField(required=False, label="Process weight λp", help_text=weight_help("lambda_p"))
    reward_params = OptionalJSONField(
        required=False,
        label="other reward weights (JSON)",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='e.g. {"process": "over_only"} (HiPRAG) or {"w_thinking": 0.6} (TIRESRAG). Empty: the paper\'s.',
    )
    lora = config_form_field("model.lora", label="LoRA", help_text="Train a LoRA adapter instead.")
    trainable_layers = config_form_field(
        "model.trainable_layers",
        required=False,
        min_value=0,
        initial=DEMO_TRAINABLE_LAYERS,
        label="train the top N layers",
        help_text="0: every weight (and with LoRA). SmolLM2 has 30; 10 made the update 1.7× faster on a 2-core CPU.",
    )
    sample_every = config_form_field(
        "logging.sample_every", help_text="Store sample trajectories every N steps (and at step 1)."
    )
    samples_per_log = config_form_field("logging.samples_per_log")

    fieldsets = (
        ("What to train", ("name", "method", "algorithm", "model_path", "dataset", "question_limit")),
        (
            "Rollouts and judge",
            ("rollout", "index", "judge", "judge_base_url", "judge_model", "judge_api_key_env"),
        ),
        ("Budgets (every rollout stops at the first it reaches)", BUDGET_NAMES),
        ("Reward weights", ("lambda_f", "lambda_p", "reward_params")),
        ("Optimisation (TRL)", (*TRAINING_NAMES, "lora", "trainable_layers")),
        ("PPO critic", PPO_NAMES),
        ("Samples", ("sample_every", "samples_per_log")),
        ("Validation and trackers", VALIDATION_NAMES),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from webapp.training.config import available_models

        self.fields["model_path"].initial = default_model_path()
        self.known_models = available_models()  # the <datalist> of the model field: warm starts included
        # Ready to train out of the box: the agent rollout on the newest ready index, the policy judging itself
        # (the one judge a bare CPU machine has), the demo's multi-hop questions when they are loaded.
        index = self.fields["index"].queryset.order_by("-pk").first()  # type: ignore[attr-defined]
        self.fields["rollout"].initial = "agent" if index is not None else "scripted"
        if index is not None:
            self.fields["index"].initial = index.pk
            # HiPRAG's heuristic detectors: instant and grounded in the dataset's evidence, where the 135M policy
            # judging itself is slow and close to random. An endpoint judge is one choice away.
            self.fields["judge"].initial = "evidence"
        dataset = Dataset.objects.filter(name=DEMO_TRAIN_DATASET).first()
        if dataset is not None:
            self.fields["dataset"].initial = dataset.pk
        from webapp.training import executors

        if executors.ray_configured():  # a cluster is configured: the run may go there as a Ray job
            self.fields["executor"] = config_form_field(  # trainer.placement's startable placements
                "executor",
                choices=executors.executor_choices(),
                help_text="local: a subprocess of the train worker; ray: a job on the Ray cluster (docs/scale.md).",
            )
            self.fieldsets = (*self.fieldsets, ("Where it runs", ("executor",)))

    def clean_model_path(self) -> str:
        value: str = self.cleaned_data["model_path"].strip()
        if value == TINY_MODEL:
            return value
        path = Path(value) if Path(value).is_absolute() else Path(settings.BASE_DIR) / value
        if not (path / "config.json").is_file():
            if refusal := model_checks.model_refusal(path):
                raise forms.ValidationError(refusal)
            raise forms.ValidationError(
                f"{value} is not a transformers model folder (no config.json); run `python -m agent.setup_model` "
                f"for SmolLM2, or use {TINY_MODEL!r}."
            )
        return str(path)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        judge, rollout = cleaned.get("judge"), cleaned.get("rollout")
        self.require_endpoint(cleaned, TRAIN)
        heuristic = judge in ("evidence", "reask")  # the evidence rules judge under-search in both
        problem = evidence_judge_problem([cleaned.get("method") or ""]) if heuristic else None
        if problem:
            self.add_error("judge", problem[0].upper() + problem[1:] + ".")
        if judge not in (None, "none") and rollout not in (None, "agent"):
            self.add_error(
                "judge", "Only the agent rollout calls a judge; scripted rollouts bring their own."
            )
        if rollout == "agent" and cleaned.get("index") is None and "index" not in self.errors:
            self.add_error(
                "index", "The agent rollout searches an index: pick one, or use the scripted rollout."
            )
        if self.errors:
            return cleaned  # the trainer's rules need every field parsed
        try:
            self.run_config(
                output_dir="(set when the run is created)"
            )  # the service makes it with its folders
        except ConfigError as exc:
            message = str(exc).split(": ", 1)[-1]
            field = self._error_field(exc.field)
            self.add_error(field, message if field else str(exc))
        return cleaned

    def _error_field(self, config_path: str) -> str | None:
        leaf = config_path.rsplit(".", 1)[-1]
        if config_path.startswith("reward.params.") and leaf in self.fields:
            return leaf  # λ_f, λ_p have fields of their own; other weights are in reward_params
        return error_field(self.fields, config_path, ERROR_FIELDS)

    def config_values(self) -> dict[str, Any]:
        """The trainer config's values this form sets (every field derived from a config field, and the rest)."""
        cleaned = self.cleaned_data
        values = config_values(self.fields, cleaned)
        params = dict(cleaned.get("reward_params") or {})
        for name in ("lambda_f", "lambda_p"):
            if cleaned.get(name) is not None:
                params[name] = cleaned[name]
        # PPO's advantages come from the critic, so TIRESRAG's GRPO group shaping is off under PPO.
        values["reward"] = {"params": params, "tiresrag_group_shaping": cleaned["algorithm"] == "grpo"}
        values["model"].setdefault("trainable_layers", 0)
        values["rollout"]["options"] = {}
        if cleaned["rollout"] == "agent":
            index = cleaned.get("index")
            if index is None:
                raise ConfigError(
                    "rollout.options", "the agent rollout needs an index; pick one or use 'scripted'"
                )
            values["rollout"]["options"]["index"] = index.path
            judge = self.judge_spec().rollout_option()
            if judge is not None:
                values["rollout"]["options"]["judge"] = judge
        return values

    def run_config(self, *, output_dir: str, data_path: str = "") -> RunConfig:
        return run_config(self.config_values(), output_dir=output_dir, data_path=data_path)


WARM_START_PATHS = (
    "data.questions_per_method",
    "data.no_search_share",
    "data.redundant_search_share",
    "max_turns",
    "max_rollout_tokens",
    "max_obs_tokens",
    "max_turn_tokens",
    "training.epochs",
    "training.learning_rate",
)
_WarmStartFields = config_form_class(
    "_WarmStartFields",
    WARM_START_PATHS,
    {
        "data.questions_per_method": {"min_value": 1},
        "data.no_search_share": {
            "min_value": 0,
            "max_value": 0.9,
            "help_text": "Share of no-search (common knowledge) demonstrations.",
        },
        "data.redundant_search_share": {
            "required": False,
            "min_value": 0,
            "max_value": 1,
            "label": "redundant-search share",
            "help_text": "Share of search demonstrations given one redundant search (repeating the first query, or "
            "asking for what its passage gave): the controlled test of a process reward (docs/warm_start.md). "
            "Needs a turn budget of 4 and tokens per rollout with room for it (764 at 64 and 100).",
        },
        # The budgets' labels, ranges and help are agent.budgets' (a demonstration needs a turn for its answer).
        "max_turns": {"required": False, "min_value": 1},
        "max_rollout_tokens": {"required": False, "min_value": 1},
        "training.epochs": {"min_value": 0.1},
    },
    root=WarmStartConfig,
)


class WarmStartForm(FieldsetsMixin, _WarmStartFields):
    """A supervised warm start (trainer.warm_start): demonstrations of the methods' formats, then SFT."""

    name = forms.CharField(max_length=200, initial="warm start")
    model_path = forms.CharField(
        label="base model",
        max_length=1000,
        widget=forms.TextInput(attrs={"list": "known-models"}),
        help_text="The instruct model to warm-start (a transformers folder on the train worker).",
    )
    methods = forms.MultipleChoiceField(
        choices=METHOD_CHOICES,
        initial=["hiprag", "search_r1"],
        widget=forms.CheckboxSelectMultiple,
        help_text="The formats to teach, one model for all (each adds about ten CPU minutes).",
    )
    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.order_by("name"),
        help_text="Questions with metadata.supporting_titles (e.g. wiki_multihop); one search per supporting fact.",
    )
    split = forms.CharField(
        required=False,
        initial="train",
        help_text="Only rows whose metadata.split starts with this; keep your evaluation questions out.",
    )
    index = forms.ModelChoiceField(
        queryset=Index.objects.filter(status=Index.Status.READY).select_related("corpus").order_by("name"),
        help_text="The demonstrations' searches go to this index (use the one you will train with).",
    )
    fieldsets = (
        ("What to teach", ("name", "model_path", "methods", "dataset", "split", "index")),
        (
            "Demonstrations and optimisation",
            tuple(form_name(p) for p in WARM_START_PATHS),
        ),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from webapp.training.config import available_models, base_model_path

        self.fields["model_path"].initial = base_model_path()
        self.known_models = available_models()

    clean_model_path = TrainingRunForm.clean_model_path

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        try:
            self.warm_start_config(output_dir="(set when the run is created)", data_path="-")
        except ConfigError as exc:
            name = exc.field.rsplit(".", 1)[-1]
            self.add_error(name if name in self.fields else None, str(exc))
        return cleaned

    def warm_start_config(self, *, output_dir: str, data_path: str) -> WarmStartConfig:
        cleaned = self.cleaned_data
        values = config_values(self.fields, cleaned)
        values["index"] = cleaned["index"].path
        values["methods"] = list(cleaned["methods"])
        values["model"] = {"path": cleaned["model_path"]}
        values.setdefault("data", {})["split"] = cleaned.get("split") or ""
        return warm_start_config(warm_start_values(values, output_dir=output_dir, data_path=data_path))
