"""The new-evaluation form and the compare page's run pickers."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings

from agent.budgets import BUDGET_BY_ROLLOUT_NAME, RolloutBudgets, RolloutOverrides, budget_field
from agent.judge_spec import EVALUATE
from webapp.common.config_form import config_form_field
from webapp.common.fieldsets import FieldsetsMixin
from webapp.common.judge_options import JudgeEndpointFields, judge_field
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.evaluation.specs import (
    EvaluationConfigError,
    EvaluationSpec,
    evaluation_spec_check,
)
from webapp.runs.models import Method, Run

# The rollout budgets a user may set, under agent.rollout.RolloutConfig's names (what the spec stores); each field's
# label, range and help are agent.budgets' declaration. Empty: the method's paper setting.
ROLLOUT_FIELDS = tuple(BUDGET_BY_ROLLOUT_NAME)
_BudgetFields = type(
    "_BudgetFields",
    (forms.Form,),
    {
        name: config_form_field(
            budget,
            root=RolloutBudgets,
            required=False,
            initial=None,
            help_text=f"{budget_field(budget).metadata['help']} Empty: the method's paper setting.",
        )
        for name, budget in BUDGET_BY_ROLLOUT_NAME.items()
    },
)


class EvaluationForm(FieldsetsMixin, JudgeEndpointFields, _BudgetFields):
    # URLs are CharFields: Django's URLValidator refuses single-label hosts such as http://retriever:8000, the
    # names services have inside a compose network; the spec check asks for an http(s) scheme.
    name = forms.CharField(required=False, max_length=200, help_text="default: method and datasets")
    method = forms.ChoiceField(choices=Method.choices, initial="hiprag")
    model = forms.CharField(
        max_length=300,
        widget=forms.TextInput(attrs={"list": "known-models"}),
        help_text="a local model folder, or the model name a served endpoint knows (with a base URL)",
    )
    engine = forms.ChoiceField(
        choices=(("transformers", "transformers"), ("vllm", "vLLM (needs `make vllm` in the worker)")),
        initial="transformers",
        required=False,
        label="Local engine",
        help_text="runs a local model folder; vLLM is about 4× faster on this CPU (docs/vllm.md)",
    )
    base_url = forms.CharField(
        required=False,
        label="Policy base URL",
        help_text="an OpenAI-compatible /v1 URL (vLLM, …); empty: local",
    )
    api_key_env = forms.CharField(
        required=False, label="Policy key variable", help_text="NAME of the environment variable with the key"
    )
    datasets = forms.ModelMultipleChoiceField(queryset=Dataset.objects.order_by("name"))
    limit = forms.IntegerField(required=False, min_value=1, help_text="questions per dataset; empty: all")
    index = forms.ModelChoiceField(
        queryset=Index.objects.filter(status=Index.Status.READY).select_related("corpus"), required=False
    )
    retrieve_url = forms.CharField(
        required=False,
        label="/retrieve URL",
        help_text="a Search-R1-compatible retrieval server instead of an index",
    )
    judge = judge_field(EVALUATE, initial="none")
    answer_judge = forms.BooleanField(required=False, label="Also judge answer correctness with the LLM")
    params = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='reward parameters as JSON, e.g. {"lambda_p": 0.4}; empty: the paper\'s',
    )
    base_run = forms.ModelChoiceField(
        queryset=Run.objects.order_by("-created_at"), required=False, help_text="the baseline to compare with"
    )

    fieldsets = (
        ("Policy", ("method", "model", "engine", "base_url", "api_key_env")),
        ("Questions and retrieval", ("datasets", "limit", "index", "retrieve_url")),
        ("Judge", ("judge", "judge_base_url", "judge_model", "judge_api_key_env", "answer_judge")),
        (
            "Settings",
            (*ROLLOUT_FIELDS, "params", "name", "base_run"),
        ),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from webapp.training.config import available_models, default_model_path

        self.known_models = available_models()  # warm-started models included
        default = default_model_path()
        self.fields["model"].initial = (
            default if default != "tiny-random" else str(settings.EVAL_DEFAULT_MODEL)
        )

    def clean_params(self) -> dict[str, Any]:
        text = self.cleaned_data.get("params", "").strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
        if not isinstance(value, dict):
            raise forms.ValidationError('a JSON object, e.g. {"lambda_p": 0.4}')
        return value

    def spec(self) -> EvaluationSpec:
        data = self.cleaned_data
        rollout = RolloutOverrides(**{k: data[k] for k in ROLLOUT_FIELDS if data.get(k) is not None})
        return EvaluationSpec(
            method=data["method"],
            model=data["model"].strip(),
            backend="openai" if data.get("base_url") else data.get("engine") or "transformers",
            base_url=data.get("base_url") or "",
            api_key_env=data.get("api_key_env", "").strip(),
            dataset_ids=tuple(d.pk for d in data["datasets"]),
            index_id=data["index"].pk if data.get("index") else None,
            retrieve_url=data.get("retrieve_url") or "",
            judge=self.judge_spec(answer_judge=data.get("answer_judge", False)),
            params=data.get("params") or {},
            rollout=rollout,
            limit=data.get("limit"),
            batch_size=settings.EVAL_BATCH_SIZE,
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            evaluation_spec_check(self.spec())
        except EvaluationConfigError as exc:
            field = exc.field if exc.field in self.fields else None
            if exc.field == "backend":
                field = "base_url"
            self.add_error(field, exc.message)
        return cleaned


class CompareForm(forms.Form):
    a = forms.ModelChoiceField(queryset=Run.objects.order_by("-created_at"), label="Run A (baseline)")
    b = forms.ModelChoiceField(queryset=Run.objects.order_by("-created_at"), label="Run B")
    metric = forms.ChoiceField(
        choices=(("em", "exact match"), ("cem", "cover exact match"), ("acc", "acc (FlashRAG)")),
        required=False,
        initial="em",
    )
    bucket = forms.CharField(required=False)
    q = forms.CharField(required=False)
    runs = forms.CharField(
        required=False,
        label="more runs",
        help_text="comma-separated run ids shown beside A and B, each with its paired difference from A",
    )

    def clean_runs(self) -> list[Run]:
        value = self.cleaned_data.get("runs") or ""
        try:
            ids = list(dict.fromkeys(int(part) for part in value.replace(" ", "").split(",") if part))
        except ValueError:
            raise forms.ValidationError("run ids separated by commas, e.g. 12,13,14") from None
        found = Run.objects.in_bulk(ids)
        missing = [str(pk) for pk in ids if pk not in found]
        if missing:
            raise forms.ValidationError(f"no run {', '.join(missing)}")
        return [found[pk] for pk in ids]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        a, b = cleaned.get("a"), cleaned.get("b")
        if a is not None and b is not None and a.pk == b.pk:
            self.add_error("b", "choose a different run from A")
        return cleaned
