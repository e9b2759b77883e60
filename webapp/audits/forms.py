from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Count

from webapp.audits.models import Audit, Label
from webapp.runs.models import Run

DEFAULT_GUIDELINES = (
    "Label every step without looking for the judge's opinion.\n"
    "Search step: was this search necessary? 'unnecessary' if the agent could have answered the step's "
    "question from what it already knew or had already retrieved (over-search).\n"
    "Non-search step: is its reasoning and conclusion correct? 'should have searched' if it states a fact the "
    "agent did not know and got wrong or guessed (under-search); 'incorrect' for any other error.\n"
    "Use 'unsure' rather than guessing."
)


class LabelForm(forms.Form):
    step = forms.IntegerField(required=False)
    label = forms.ChoiceField(choices=Label.Value.choices)
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    seconds_spent = forms.IntegerField(required=False, min_value=0, max_value=24 * 3600)


class AdjudicationForm(forms.Form):
    label = forms.ChoiceField(
        choices=[("", "(none: back to the majority)"), *Label.Value.choices], required=False
    )
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class RunChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.name} · {obj.method} · {obj.n_trajectories} trajectories"


class UserChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        role = getattr(getattr(obj, "profile", None), "role", "admin" if obj.is_superuser else "")
        return f"{obj.get_username()} ({role})" if role else obj.get_username()


class AuditForm(forms.Form):
    """The audit setup page. Sampling errors (too few trajectories) come back from the service as field errors."""

    name = forms.CharField(max_length=200)
    runs = RunChoiceField(
        queryset=Run.objects.annotate(n_trajectories=Count("trajectories")).order_by("-created_at"),
        help_text="the trajectories of these runs are the population sampled",
    )
    sample_size = forms.IntegerField(
        min_value=1, initial=200, help_text="trajectories to audit (HiPRAG audited 200)"
    )
    seed = forms.IntegerField(initial=0, help_text="the same seed and runs give the same sample")
    stratification = forms.ChoiceField(
        choices=Audit.Stratification.choices,
        required=False,
        help_text="sample each stratum in proportion to its size (times the over-sampling factor below); every "
        "trajectory is weighted by 1 / its inclusion probability",
    )
    oversample = forms.FloatField(
        min_value=0.01,
        initial=1.0,
        required=False,
        help_text="by verdict or disagreement: draw flagged (disagreeing) trajectories this many times as often "
        "as their share of the runs (e.g. 5); the weights keep the estimates unbiased",
    )
    annotators = UserChoiceField(
        queryset=get_user_model()
        .objects.filter(is_active=True)
        .select_related("profile")
        .order_by("username"),
        help_text="people who label the steps",
    )
    annotators_per_item = forms.IntegerField(
        min_value=1, initial=1, help_text="two or more give inter-annotator agreement"
    )
    guidelines = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}), required=False, initial=DEFAULT_GUIDELINES
    )
    blind = forms.BooleanField(
        required=False, initial=True, help_text="hide the judges' verdicts from the annotators"
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        annotators, per_item = cleaned.get("annotators"), cleaned.get("annotators_per_item")
        if annotators is not None and per_item is not None and per_item > len(annotators):
            self.add_error(
                "annotators_per_item",
                f"{per_item} annotators per item needs at least {per_item} annotators; {len(annotators)} chosen.",
            )
        return cleaned
