"""A run's, an evaluation's and a score job's reward weights are refused alike, by scoring.params, naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from trainer.config import ConfigError
from webapp.api.services import ScoringParamsError, score_params_check
from webapp.evaluation.specs import EvaluationConfigError, EvaluationSpec, evaluation_spec_check
from webapp.training.config import check_reward_params

BAD = [
    ("hiprag", {"lambda_p": 11}, "params.lambda_p", "must lie in [0.0, 10.0], got 11"),
    ("tiresrag", {"w_sufficiency": -1}, "params.w_sufficiency", "must lie in [0.0, 10.0], got -1"),
    ("search_p1", {"variant": "x"}, "params.variant", "must be one of main, alg3, got 'x'"),
    ("autosearch", {"lambda_f": 0.2}, "params.lambda_f", "unknown; expected one of none"),
]


def _evaluation(method: str, params: dict[str, Any]) -> EvaluationSpec:
    return EvaluationSpec(
        method=method,
        model="served-model",
        dataset_ids=(1,),
        backend="openai",
        base_url="http://127.0.0.1:1/v1",
        retrieve_url="http://127.0.0.1:2/retrieve",
        params=params,
    )


@pytest.mark.parametrize(("method", "params", "field", "message"), BAD)
def test_each_front_end_refuses_a_bad_weight_with_scorings_message(
    method: str, params: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ConfigError) as run:
        check_reward_params(method, params)
    assert (run.value.field, str(run.value)) == (f"reward.{field}", f"reward.{field}: {message}")

    with pytest.raises(EvaluationConfigError) as evaluation:
        evaluation_spec_check(_evaluation(method, params))
    assert (evaluation.value.field, evaluation.value.message) == ("params", f"{field}: {message}")

    with pytest.raises(ScoringParamsError) as job:
        score_params_check(method=method, params=params)
    assert (job.value.field, job.value.message) == (field, message)


@pytest.mark.parametrize("method", ["search_r1", "hiprag", "autosearch", "search_p1", "tiresrag"])
def test_the_papers_weights_pass_everywhere(method: str) -> None:
    check_reward_params(method, {})
    evaluation_spec_check(_evaluation(method, {}))
    score_params_check(method=method, params={})
