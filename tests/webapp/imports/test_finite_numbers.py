"""No inf or NaN stored or exported: 1e999 is refused at import naming its line and field; the step-rewards
exports never write Infinity or NaN."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.webapp.factories import RunFactory, StepFactory
from webapp.common.importing import DataImportError
from webapp.trajectories.models import Trajectory
from webapp.trajectories.services import trajectory_import

pytestmark = pytest.mark.django_db

LINE = '{"question": "capital of France?", "golden_answers": ["Paris"], "format": "search_r1", '
LINE += '"response": "<think>x</think><answer>Paris</answer>", '


@pytest.mark.parametrize(
    ("tail", "field"),
    [
        ('"reward": 1e999}', "reward"),
        ('"reward": -1e999}', "reward"),
        ('"reward": NaN}', "reward"),
        ('"reward": ' + "9" * 400 + "}", "reward"),
        ('"step_rewards": [0.5, 1e999]}', "step_rewards"),
        ('"reward_components": {"outcome": 1e999}}', "reward_components.outcome"),
        ('"step": ' + "9" * 20 + "}", "step"),
    ],
)
def test_a_number_out_of_range_is_refused_naming_the_line_and_field(tmp_path, tail, field):
    run = RunFactory()
    path = tmp_path / "t.jsonl"
    path.write_text(LINE + '"reward": 1.0}\n' + LINE + tail + "\n")
    with pytest.raises(DataImportError) as caught:
        trajectory_import(path=str(path), run_id=run.pk, display_name="t.jsonl")
    assert (caught.value.line, caught.value.field) == (2, field)
    assert not Trajectory.objects.exists()  # all or nothing


def test_json_nested_too_deep_or_with_too_many_digits_is_an_import_error(tmp_path):
    path = tmp_path / "t.jsonl"
    for text in ("[" * 100_000 + "]" * 100_000, '{"reward": ' + "9" * 5000 + "}"):
        path.write_text(text + "\n")
        with pytest.raises(DataImportError, match="invalid JSON"):
            trajectory_import(path=str(path), display_name="t.jsonl")


def test_the_step_reward_exports_never_write_infinity_or_nan(api_client):
    run = RunFactory()
    steps = [StepFactory(trajectory__run=run, reward=r) for r in (0.5, float("inf"), float("nan"))]
    response = api_client.get(f"/api/v1/runs/{run.pk}/step-rewards.jsonl")
    text = b"".join(response.streaming_content).decode()
    assert "Infinity" not in text and "NaN" not in text
    rows = [
        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the export"))
        for line in text.splitlines()
    ]
    assert [r["reward"] for r in rows] == [0.5, None, None]
    response = api_client.get(f"/api/v1/runs/{run.pk}/step-rewards.csv", HTTP_ACCEPT="text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(int(r["step_id"]), r["reward"]) for r in rows] == [
        (s.pk, v) for s, v in zip(steps, ("0.5", "", ""), strict=True)
    ]
