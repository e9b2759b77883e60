"""The new training run form. Ranges and cross-field rules are trainer.config's (see webapp.training.config)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings

from trainer.config import (
    DEMO_TRAINABLE_LAYERS,
    TINY_MODEL,
    ConfigError,
    LoggingConfig,
    PPOConfig,
    RolloutConfig,
    TrainingConfig,
)
from trainer.warm_start import WarmStartData, WarmStartTraining
from webapp.common.fieldsets import FieldsetsMixin
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.runs.models import Method, Run
from webapp.training.config import (
    BUDGET_FIELDS,
    PPO_FIELDS,
    TRAINING_FIELDS,
    build_config,
    default_model_path,
    form_field_for,
)

ENV_VAR_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_T, _P, _L, _R = TrainingConfig(), PPOConfig(), LoggingConfig(), RolloutConfig()
DEFAULT_BATCH = _T.per_device_train_batch_size
_WS, _WD = WarmStartTraining(), WarmStartData()
DEMO_TRAIN_DATASET = "demo_multihop"  # webapp.imports.services_demo
# Two searches of ~100 retrieved tokens, their turns and the answer fit (agent.rollout.room_for_another_search
# asks for the answer when a third would not); 384 cut most of the warm model's rollouts before their answer.
DEMO_ROLLOUT_TOKENS = _T.max_completion_length


class OptionalJSONField(forms.JSONField):
    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)  # an empty box, not "null"


class TrainingRunForm(FieldsetsMixin, forms.Form):
    name = forms.CharField(max_length=200, initial="hiprag-grpo")
    method = forms.ChoiceField(choices=Method.choices, initial=Method.HIPRAG, help_text="The reward method.")
    algorithm = forms.ChoiceField(choices=Run.Algorithm.choices, initial=Run.Algorithm.GRPO)
    model_path = forms.CharField(
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
    question_limit = forms.IntegerField(
        min_value=0, initial=0, help_text="Train on the first N questions; 0: all."
    )
    rollout = forms.ChoiceField(
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
    max_turns = forms.IntegerField(
        required=False,
        initial=_R.max_turns,
        label="turn budget",
        help_text="Search turns / steps / actions before the final answer (each method's own budget).",
    )
    max_turn_tokens = forms.IntegerField(
        required=False,
        initial=_R.max_turn_tokens,
        label="tokens per turn",
        help_text="A model turn is cut here.",
    )
    max_rollout_tokens = forms.IntegerField(
        required=False,
        initial=DEMO_ROLLOUT_TOKENS,
        min_value=0,
        label="tokens per rollout",
        help_text="Model and retrieved tokens; the rollout ends when they are spent. 0: max completion length.",
    )
    max_obs_tokens = forms.IntegerField(
        required=False,
        initial=_R.max_obs_tokens,
        label="retrieved tokens per search",
        help_text="Observations are cut here.",
    )
    topk = forms.IntegerField(required=False, initial=_R.topk, label="passages per search")
    judge = forms.ChoiceField(
        choices=(
            ("none", "none"),
            ("policy", "policy judges itself (CPU demo only)"),
            ("evidence", "evidence — heuristic, no LLM (HiPRAG: supporting passages and repeated queries)"),
            ("endpoint", "OpenAI-compatible endpoint"),
        ),
        initial="none",
        help_text="The step/answer judge of the agent rollout (HiPRAG's over/under-search detector, …).",
    )
    judge_base_url = forms.URLField(required=False, label="judge base URL", assume_scheme="https")
    judge_model = forms.CharField(required=False, max_length=300, label="judge model")
    judge_api_key_env = forms.CharField(
        required=False,
        max_length=100,
        label="judge API key variable",
        help_text="The NAME of the environment variable holding the key on the train worker — never the key.",
    )
    lambda_f = forms.FloatField(required=False, label="λ_f", help_text="Format weight (HiPRAG, Search-P1).")
    lambda_p = forms.FloatField(required=False, label="λ_p", help_text="Process weight (HiPRAG, Search-P1).")
    reward_params = OptionalJSONField(
        required=False,
        label="other reward weights (JSON)",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='e.g. {"process": "over_only"} (HiPRAG) or {"w_thinking": 0.6} (TIRESRAG). Empty: the paper\'s.',
    )
    max_steps = forms.IntegerField(initial=_T.max_steps)
    learning_rate = forms.FloatField(
        initial=1e-5, help_text="1e-5 moves a 135M policy within a few steps; the papers use 1e-6 for 3B–7B."
    )
    num_generations = forms.IntegerField(initial=_T.num_generations, help_text="Rollouts per question (≥ 2).")
    per_device_train_batch_size = forms.IntegerField(
        initial=DEFAULT_BATCH,
        help_text="Rollouts per step, a multiple of num_generations: batch / generations questions per step.",
    )
    gradient_accumulation_steps = forms.IntegerField(initial=_T.gradient_accumulation_steps)
    num_iterations = forms.IntegerField(initial=_T.num_iterations, help_text="μ: passes over each batch.")
    max_completion_length = forms.IntegerField(initial=_T.max_completion_length)
    beta = forms.FloatField(initial=_T.beta, help_text="KL coefficient (0: no reference model).")
    epsilon = forms.FloatField(initial=_T.epsilon, help_text="Clip range of the policy ratio.")
    temperature = forms.FloatField(initial=_T.temperature)
    loss_type = forms.ChoiceField(
        choices=[(x, x) for x in ("grpo", "bnpo", "dr_grpo", "dapo")], initial=_T.loss_type
    )
    seed = forms.IntegerField(initial=_T.seed, min_value=0)
    lora = forms.BooleanField(required=False, label="LoRA", help_text="Train a LoRA adapter instead.")
    trainable_layers = forms.IntegerField(
        required=False,
        min_value=0,
        initial=DEMO_TRAINABLE_LAYERS,
        label="train the top N layers",
        help_text="0: every weight (and with LoRA). SmolLM2 has 30; 10 made the update 1.7× faster on a 2-core CPU.",
    )
    critic_learning_rate = forms.FloatField(
        initial=_P.critic_learning_rate, label="critic learning rate (PPO)"
    )
    gamma = forms.FloatField(initial=_P.gamma, label="γ (PPO)")
    lam = forms.FloatField(initial=_P.lam, label="GAE λ (PPO)")
    vf_coef = forms.FloatField(initial=_P.vf_coef, label="value loss coefficient (PPO)")
    sample_every = forms.IntegerField(
        initial=_L.sample_every, help_text="Store sample trajectories every N steps (and at step 1)."
    )
    samples_per_log = forms.IntegerField(initial=_L.samples_per_log)

    fieldsets = (
        ("What to train", ("name", "method", "algorithm", "model_path", "dataset", "question_limit")),
        (
            "Rollouts and judge",
            ("rollout", "index", "judge", "judge_base_url", "judge_model", "judge_api_key_env"),
        ),
        ("Budgets (every rollout stops at the first it reaches)", BUDGET_FIELDS),
        ("Reward weights", ("lambda_f", "lambda_p", "reward_params")),
        ("Optimisation (TRL)", (*TRAINING_FIELDS, "lora", "trainable_layers")),
        ("PPO critic", PPO_FIELDS),
        ("Samples", ("sample_every", "samples_per_log")),
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

    def clean_model_path(self) -> str:
        value: str = self.cleaned_data["model_path"].strip()
        if value == TINY_MODEL:
            return value
        path = Path(value) if Path(value).is_absolute() else Path(settings.BASE_DIR) / value
        if not (path / "config.json").is_file():
            raise forms.ValidationError(
                f"{value} is not a transformers model folder (no config.json); run `python -m agent.setup_model` "
                f"for SmolLM2, or use {TINY_MODEL!r}."
            )
        return str(path)

    def clean_judge_api_key_env(self) -> str:
        value: str = self.cleaned_data.get("judge_api_key_env", "").strip()
        if value and not ENV_VAR_NAME.match(value):
            raise forms.ValidationError(
                "Give the NAME of an environment variable (e.g. JUDGE_API_KEY), not the key itself."
            )
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        judge, rollout = cleaned.get("judge"), cleaned.get("rollout")
        if judge == "endpoint":
            for name in ("judge_base_url", "judge_model"):
                if not cleaned.get(name) and name not in self.errors:
                    self.add_error(name, "Required for an endpoint judge.")
        if judge == "evidence" and cleaned.get("method") in (Method.TIRESRAG, Method.SEARCH_P1):
            self.add_error(
                "judge",
                "The evidence judge implements HiPRAG's over-/under-search detectors only; TIRESRAG-R1 and "
                "Search-P1 need an LLM judge (an endpoint, or the policy on a CPU demo).",
            )
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
            build_config(cleaned, output_dir="(set when the run is created)")  # the service rebuilds it
        except ConfigError as exc:
            message = str(exc).split(": ", 1)[-1]
            field = form_field_for(exc.field)
            self.add_error(field, message if field else str(exc))
        return cleaned


class WarmStartForm(FieldsetsMixin, forms.Form):
    """A supervised warm start (trainer.warm_start): demonstrations of the methods' formats, then SFT."""

    name = forms.CharField(max_length=200, initial="warm start")
    model_path = forms.CharField(
        label="base model",
        max_length=1000,
        widget=forms.TextInput(attrs={"list": "known-models"}),
        help_text="The instruct model to warm-start (a transformers folder on the train worker).",
    )
    methods = forms.MultipleChoiceField(
        choices=Method.choices,
        initial=[Method.HIPRAG, Method.SEARCH_R1],
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
    questions_per_method = forms.IntegerField(initial=_WD.questions_per_method, min_value=1)
    no_search_share = forms.FloatField(
        initial=_WD.no_search_share,
        min_value=0,
        max_value=0.9,
        help_text="Share of no-search (common knowledge) demonstrations.",
    )
    epochs = forms.FloatField(initial=_WS.epochs, min_value=0.1)
    learning_rate = forms.FloatField(initial=_WS.learning_rate)
    max_obs_tokens = forms.IntegerField(
        initial=_R.max_obs_tokens,
        min_value=1,
        label="retrieved tokens per search",
        help_text="As in training.",
    )
    max_turn_tokens = forms.IntegerField(
        initial=_R.max_turn_tokens,
        min_value=1,
        label="tokens per turn",
        help_text="As in training: a demonstration with a longer model turn is left out.",
    )

    fieldsets = (
        ("What to teach", ("name", "model_path", "methods", "dataset", "split", "index")),
        (
            "Demonstrations and optimisation",
            (
                "questions_per_method",
                "no_search_share",
                "max_obs_tokens",
                "max_turn_tokens",
                "epochs",
                "learning_rate",
            ),
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
        from trainer.warm_start import warm_start_config
        from webapp.training.config import warm_start_values

        try:
            warm_start_config(
                warm_start_values(cleaned, output_dir="(set when the run is created)", data_path="-")
            )
        except ConfigError as exc:
            name = exc.field.rsplit(".", 1)[-1]
            self.add_error(name if name in self.fields else None, str(exc))
        return cleaned
