"""Forms that render through ``common/_fieldsets.html`` list every field once; a partial list is refused."""

from __future__ import annotations

import pytest
from django import forms
from django.core.exceptions import ImproperlyConfigured

from webapp.common.fieldsets import FieldsetsMixin
from webapp.evaluation.forms import EvaluationForm
from webapp.experiments.forms import ExperimentForm
from webapp.training.forms import TrainingRunForm, WarmStartForm

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("form_class", [TrainingRunForm, WarmStartForm, ExperimentForm, EvaluationForm])
def test_every_field_is_in_exactly_one_fieldset(form_class: type) -> None:
    form = form_class()
    grouped = form.grouped_fields()
    names = [field.name for _legend, fields in grouped for field in fields]
    assert sorted(names) == sorted(form.fields)
    assert all(legend for legend, _fields in grouped)


class _Partial(FieldsetsMixin, forms.Form):
    a = forms.CharField()
    b = forms.CharField()
    fieldsets = (("A", ("a", "c")), ("again", ("a",)))


def test_a_partial_list_names_what_is_wrong() -> None:
    with pytest.raises(ImproperlyConfigured) as error:
        _Partial().grouped_fields()
    assert str(error.value) == "_Partial.fieldsets: not fields: c; in no fieldset: b; in two fieldsets: a"


def test_the_page_renders_each_group_as_a_fieldset(researcher_client) -> None:
    html = researcher_client.get("/training/new/").content.decode()
    assert html.count("<fieldset>") == len(TrainingRunForm.fieldsets)
    for name in ("max_turn_tokens", "trainable_layers", "samples_per_log"):
        assert f'id="field-{name}"' in html
