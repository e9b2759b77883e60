from __future__ import annotations

from typing import Any

from django import forms

from webapp.corpora.models import Index
from webapp.imports.models import ImportJob
from webapp.imports.services import UploadTooLarge, upload_size_check
from webapp.runs.models import Run


class ImportForm(forms.Form):
    kind = forms.ChoiceField(choices=ImportJob.Kind.choices)
    file = forms.FileField()
    name = forms.CharField(required=False, max_length=200, help_text="corpus or dataset name to create")
    run = forms.ModelChoiceField(
        Run.objects.all(),
        required=False,
        help_text="trajectories: the run they belong to; a run's spool: the run to write into (default: a new run)",
    )
    dataset = forms.CharField(
        required=False, max_length=200, help_text="trajectories: dataset name to resolve question ids in"
    )
    index = forms.ModelChoiceField(
        Index.objects.filter(status=Index.Status.READY),
        required=False,
        help_text="an experiment's spool: an index of the corpus it ran on (its checksum is checked; default: the "
        "ready index of that corpus)",
    )

    def clean_file(self) -> Any:
        upload = self.cleaned_data.get("file")
        try:
            upload_size_check(getattr(upload, "size", None))
        except UploadTooLarge as exc:
            raise forms.ValidationError(str(exc)) from None
        return upload

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        if kind in (
            ImportJob.Kind.CORPUS,
            ImportJob.Kind.DATASET,
            ImportJob.Kind.DATASET_PARQUET,
        ) and not data.get("name"):
            self.add_error("name", "A corpus or dataset import needs a name.")
        return data
