"""The new training run form. Ranges and cross-field rules are trainer.config's (see webapp.training.config)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings

from trainer.config import TINY_MODEL, ConfigError, LoggingConfig, PPOConfig, TrainingConfig
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.runs.models import Method, Run
from webapp.training.config import build_config, default_model_path, form_field_for

ENV_VAR_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_T, _P, _L = TrainingConfig(), PPOConfig(), LoggingConfig()


class OptionalJSONField(forms.JSONField):
    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)  # an empty box, not "null"


class TrainingRunForm(forms.Form):
    name = forms.CharField(max_length=200, initial="hiprag-grpo")
    method = forms.ChoiceField(choices=Method.choices, initial=Method.HIPRAG, help_text="The reward method.")
    algorithm = forms.ChoiceField(choices=Run.Algorithm.choices, initial=Run.Algorithm.GRPO)
    model_path = forms.CharField(
        label="policy model",
        max_length=1000,
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
    judge = forms.ChoiceField(
        choices=(
            ("none", "none"),
            ("policy", "policy judges itself (CPU demo only)"),
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
    learning_rate = forms.FloatField(initial=_T.learning_rate)
    num_generations = forms.IntegerField(initial=_T.num_generations, help_text="Rollouts per question (≥ 2).")
    per_device_train_batch_size = forms.IntegerField(
        initial=_T.per_device_train_batch_size, help_text="A multiple of num_generations."
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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["model_path"].initial = default_model_path()
        self.fields["rollout"].initial = "agent" if self.fields["index"].queryset.exists() else "scripted"  # type: ignore[attr-defined]

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
