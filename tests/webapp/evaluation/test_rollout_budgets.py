"""An evaluation's rollout settings are agent.budgets' RolloutOverrides: stored as before, checked as declared."""

from __future__ import annotations

import pytest

from agent.budgets import RolloutOverrides, budget_field
from webapp.evaluation.forms import ROLLOUT_FIELDS, EvaluationForm
from webapp.evaluation.specs import EvaluationConfigError, EvaluationSpec, evaluation_spec_check

STORED = {
    "method": "hiprag",
    "model": "served-model",
    "dataset_ids": [1],
    "backend": "openai",
    "base_url": "http://127.0.0.1:1/v1",
    "retrieve_url": "http://127.0.0.1:2/retrieve",
    "rollout": {"topk": 2, "max_new_tokens": 48, "seed": 3},
}


def test_a_stored_spec_keeps_its_rollout_settings_as_they_were_stored() -> None:
    spec = EvaluationSpec.from_json(STORED)
    assert spec.rollout == RolloutOverrides(topk=2, max_new_tokens=48, seed=3)
    assert spec.to_json()["rollout"] == STORED["rollout"]
    assert EvaluationSpec.from_json({**STORED, "rollout": {}}).to_json()["rollout"] == {}


def test_the_spec_check_refuses_a_budget_out_of_its_declared_range_by_its_stored_name() -> None:
    spec = EvaluationSpec.from_json({**STORED, "rollout": {"max_new_tokens": 0}})
    with pytest.raises(EvaluationConfigError) as caught:
        evaluation_spec_check(spec)
    assert (caught.value.field, caught.value.message) == ("max_new_tokens", "must be ≥ 1, got 0")


@pytest.mark.django_db
def test_the_forms_budget_fields_are_the_declared_budgets() -> None:
    form = EvaluationForm()
    assert set(ROLLOUT_FIELDS) <= set(form.fields)
    turn_tokens = form.fields["max_new_tokens"]
    assert turn_tokens.label == budget_field("max_turn_tokens").metadata["label"]
    assert (turn_tokens.min_value, form.fields["topk"].max_value) == (1, 50)
    assert not turn_tokens.required and turn_tokens.initial is None  # empty: the paper's
    refused = EvaluationForm({"topk": 0})
    assert not refused.is_valid() and refused.errors["topk"] == ["must be ≥ 1, got 0"]
