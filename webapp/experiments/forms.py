"""Start an experiment from the browser: the same choices as ``manage.py experiment``."""

from __future__ import annotations

from typing import Any

from django import forms

from agent.judge_spec import EXPERIMENT
from trainer.config import ALGORITHMS, config_field
from webapp.common.config_form import config_form_field
from webapp.common.fieldsets import FieldsetsMixin
from webapp.common.judge_options import JudgeEndpointFields, judge_field
from webapp.corpora.models import Index
from webapp.datasets.models import Dataset
from webapp.experiments.specs import (
    DEFAULT_BASELINE,
    DEFAULT_JUDGE,
    DEFAULT_METHODS,
    DEFAULTS,
    EVAL_ENGINES,
    KNOB_CHOICES,
    KNOBS,
    SCREEN_FIELDS,
    Arm,
    ExperimentConfigError,
    knob_default,
    knob_name,
    parse_arm,
    spec_option,
)
from webapp.runs.models import Method
from webapp.training import executors

_D = DEFAULTS
# The knobs, named as the command's options; each a trainer.config field (type, help), at the experiment's default.
_KnobFields = type(
    "_KnobFields",
    (forms.Form,),
    {
        knob_name(path): config_form_field(
            path,
            initial=knob_default(path),
            required=False,  # left empty: the experiment's default
            **({"choices": KNOB_CHOICES[path]} if path in KNOB_CHOICES else {}),
            label=config_field(path)[0].metadata.get("label") or knob_name(path).replace("_", " "),
            help_text="",
        )
        for path in KNOBS
    },
)
KNOB_FIELDS = tuple(knob_name(path) for path in KNOBS)
BUDGETS = (*KNOB_FIELDS[:2], "algorithm", *KNOB_FIELDS[2:], "eval_batch_size", "eval_engine", "resamples")
_SEEDS_DEFAULT, _SEEDS = spec_option("seeds")  # ExperimentSpec.seeds: its range and help


class ExperimentForm(FieldsetsMixin, JudgeEndpointFields, _KnobFields):
    name = forms.CharField(max_length=200, required=False, help_text="Empty: the arms, steps and seed.")
    methods = forms.MultipleChoiceField(
        choices=Method.choices,
        initial=list(DEFAULT_METHODS),
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="An arm per method, named after it (unless arms are given below).",
    )
    arms = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One arm a line: name=method:key=value,… — e.g. outcome=hiprag:lambda_p=0 and "
        "process=hiprag:lambda_p=0.4 (HiPRAG's Table 2: one format, two process weights).",
    )
    seeds = forms.IntegerField(
        required=False,
        min_value=_SEEDS["min"],
        max_value=_SEEDS["max"],
        initial=_SEEDS_DEFAULT,
        label=_SEEDS["label"],
        help_text=_SEEDS["help"],
    )
    baseline = forms.CharField(
        max_length=64,
        initial=DEFAULT_BASELINE,
        help_text="The arm the others are compared with (differences are arm minus this).",
    )
    model_path = forms.CharField(
        label="start policy",
        max_length=1000,
        required=False,
        widget=forms.TextInput(attrs={"list": "known-models"}),
        help_text="Every method trains from it. Empty: the warm-started SmolLM2 (VAR_DIR/models/"
        "SmolLM2-135M-Instruct-warm); 'tiny-random' for a smoke test.",
    )
    train_dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.order_by("name"), label="training questions"
    )
    train_split = forms.CharField(
        required=False, initial="train", help_text="metadata.split prefix; empty: all"
    )
    train_limit = forms.IntegerField(min_value=0, initial=64, help_text="The first N; 0: all.")
    train_drop_guessable = forms.BooleanField(
        required=False,
        label="leave out guessable questions",
        help_text="Yes/no questions, and those naming their answer among their options: an outcome reward pays "
        "for guessing them without a search (Experiment #2 in docs/experiment.md).",
    )
    eval_dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.order_by("name"), label="held-out questions"
    )
    eval_split = forms.CharField(
        required=False, initial="test", help_text="metadata.split prefix; empty: all"
    )
    eval_limit = forms.IntegerField(min_value=0, initial=100, help_text="The first N; 0: all.")
    index = forms.ModelChoiceField(
        queryset=Index.objects.filter(status=Index.Status.READY).select_related("corpus").order_by("name")
    )
    judge = judge_field(EXPERIMENT, initial=DEFAULT_JUDGE)
    algorithm = forms.ChoiceField(choices=[(a, a.upper()) for a in ALGORITHMS], initial=_D.algorithm)
    screen_samples = forms.IntegerField(
        required=False,
        min_value=0,
        initial=_D.screen_samples,
        label="screen: samples per question",
        help_text="Sample the start model N times on every training question first; 0: no screen.",
    )
    screen_min_passes = forms.IntegerField(
        required=False, min_value=0, initial=_D.screen_min_passes, label="screen: at least"
    )
    screen_max_passes = forms.IntegerField(
        required=False,
        min_value=-1,
        initial=_D.screen_max_passes,
        label="screen: at most",
        help_text="Correct answers of N to keep a question; -1: N − 1 (a group can hold both outcomes).",
    )
    screen_unscreened_share = forms.FloatField(
        required=False,
        min_value=0,
        max_value=0.99,
        initial=_D.screen_unscreened_share,
        label="screen: unscreened share",
        help_text="Share of the training set drawn from the questions the screen drops.",
    )
    eval_batch_size = forms.IntegerField(min_value=1, initial=_D.eval_batch_size)
    eval_engine = forms.ChoiceField(
        choices=[(e, e) for e in EVAL_ENGINES],
        initial=_D.eval_engine,
        required=False,
        help_text="vllm: about 4× faster evaluations on this CPU; the worker needs the vLLM stack (make vllm).",
    )
    resamples = forms.IntegerField(min_value=1, initial=_D.resamples, label="bootstrap resamples")
    executor = forms.ChoiceField(
        label="stages run on",
        choices=(),  # executors.executor_choices(), read when the form is made: ray once RAY_ADDRESS is set
        initial=_D.executor,
        required=False,
        help_text="Where the stage runner (python -m trainer.jobs experiment) trains and evaluates: local, a "
        "subprocess of the experiment's worker; ray, one job on the Ray cluster (RAY_ADDRESS).",
    )

    def clean_eval_engine(self) -> str:
        return str(self.cleaned_data.get("eval_engine") or _D.eval_engine)

    def clean_seeds(self) -> int:
        return int(self.cleaned_data.get("seeds") or _SEEDS_DEFAULT)

    def clean_executor(self) -> str:
        return str(self.cleaned_data.get("executor") or _D.executor)

    fieldsets = (
        ("Arms and start", ("name", "methods", "arms", "baseline", "seeds", "model_path")),
        (
            "Questions and index",
            (
                "train_dataset",
                "train_split",
                "train_limit",
                "train_drop_guessable",
                "eval_dataset",
                "eval_split",
                "eval_limit",
                "index",
            ),
        ),
        ("Judge", ("judge", "judge_base_url", "judge_model", "judge_api_key_env")),
        ("Training and budgets (training and evaluation)", BUDGETS),
        ("Screen of the training questions", SCREEN_FIELDS),
        ("Where it trains", ("executor",)),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from webapp.training.config import available_models

        self.known_models = available_models()
        self.fields["executor"].choices = executors.executor_choices()  # type: ignore[attr-defined]
        index = self.fields["index"].queryset.order_by("-pk").first()  # type: ignore[attr-defined]
        if index is not None:
            self.fields["index"].initial = index.pk

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        self.require_endpoint(cleaned, EXPERIMENT)
        try:
            arms = [parse_arm(line) for line in (cleaned.get("arms") or "").splitlines() if line.strip()]
        except ExperimentConfigError as exc:
            self.add_error("arms", exc.message)
            return cleaned
        arms = arms or [Arm(name=m, method=m) for m in cleaned.get("methods") or []]
        if not arms and "methods" not in self.errors:
            self.add_error("methods", "Choose at least one method, or give arms.")
        cleaned["arm_list"] = tuple(arms)
        names = [arm.name for arm in arms]
        if arms and cleaned.get("baseline") and cleaned["baseline"] not in names:
            self.add_error("baseline", f"Name one of the arms: {', '.join(names)}.")
        return cleaned
