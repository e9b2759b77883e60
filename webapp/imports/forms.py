from __future__ import annotations

from typing import Any

from django import forms

from webapp.imports.models import ImportJob
from webapp.runs.models import Run


class ImportForm(forms.Form):
    kind = forms.ChoiceField(choices=ImportJob.Kind.choices)
    file = forms.FileField()
    name = forms.CharField(required=False, max_length=200, help_text="corpus or dataset name to create")
    run = forms.ModelChoiceField(
        Run.objects.all(), required=False, help_text="trajectories: the run they belong to"
    )
    dataset = forms.CharField(
        required=False, max_length=200, help_text="trajectories: dataset name to resolve question ids in"
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("kind") != ImportJob.Kind.TRAJECTORIES and not data.get("name"):
            self.add_error("name", "A corpus or dataset import needs a name.")
        return data
