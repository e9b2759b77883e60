from __future__ import annotations

import json

import pytest

from tests.webapp.factories import DatasetFactory, QuestionFactory, RunFactory
from webapp.common.importing import DataImportError
from webapp.trajectories.models import Step, Trajectory
from webapp.trajectories.services import trajectory_import

pytestmark = pytest.mark.django_db

HIPRAG_RESPONSE = (
    "<think>"
    "<step><reasoning>I need the capital of France.</reasoning><search>capital of France</search>"
    "<context>Paris is the capital of France.</context><conclusion>The capital is Paris.</conclusion></step>"
    "<step><reasoning>So the answer follows.</reasoning><conclusion>Paris.</conclusion></step>"
    "</think><answer>Paris</answer>"
)
SEARCH_R1_BROKEN = "<think>hmm</think><search>capital</search>"  # stops before any <information> or <answer>


def _write(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_it_parses_responses_into_steps(tmp_path):
    question = QuestionFactory(external_id="q1", dataset__name="toy", golden_answers=["Paris"])
    run = RunFactory()
    path = _write(
        tmp_path / "t.jsonl",
        [
            {
                "question_id": "q1",
                "dataset": "toy",
                "response": HIPRAG_RESPONSE,
                "format": "hiprag",
                "step": 7,
            },
        ],
    )
    assert trajectory_import(path=path, run_id=run.pk) == 1
    trajectory = Trajectory.objects.get()
    assert (trajectory.run, trajectory.question, trajectory.dataset) == (run, question, question.dataset)
    assert (trajectory.format_ok, trajectory.final_answer, trajectory.exact_match, trajectory.f1) == (
        True,
        "Paris",
        True,
        1.0,
    )
    assert (trajectory.n_steps, trajectory.n_searches, trajectory.training_step) == (2, 1, 7)
    steps = list(
        Step.objects.order_by("index").values_list("index", "kind", "query", "context", "conclusion")
    )
    assert steps == [
        (0, "search", "capital of France", "Paris is the capital of France.", "The capital is Paris."),
        (1, "non_search", None, None, "Paris."),
    ]


def test_it_takes_a_question_and_golds_without_an_id(tmp_path):
    path = _write(
        tmp_path / "t.jsonl",
        [
            {
                "question": "Capital of France?",
                "golden_answers": ["Lyon"],
                "response": HIPRAG_RESPONSE,
                "format": "hiprag",
                "reward": 0.5,
                "reward_components": {"outcome": 0.0},
                "step_rewards": [0.1, 0.2],
            },
        ],
    )
    trajectory_import(path=path)
    trajectory = Trajectory.objects.get()
    assert (trajectory.question_text, trajectory.golden_answers, trajectory.exact_match) == (
        "Capital of France?",
        ["Lyon"],
        False,
    )
    assert (trajectory.total_reward, trajectory.reward_components) == (0.5, {"outcome": 0.0})
    assert list(Step.objects.order_by("index").values_list("reward", flat=True)) == [0.1, 0.2]


def test_it_stores_a_broken_response_with_the_reason_and_position(tmp_path):
    path = _write(
        tmp_path / "t.jsonl",
        [
            {
                "question": "q?",
                "golden_answers": ["Paris"],
                "response": SEARCH_R1_BROKEN,
                "format": "search_r1",
            },
        ],
    )
    trajectory_import(path=path)
    trajectory = Trajectory.objects.get()
    assert trajectory.format_ok is False
    assert trajectory.format_error
    assert trajectory.format_error_position is not None
    assert (trajectory.final_answer, trajectory.exact_match, trajectory.f1) == (None, False, 0.0)


@pytest.mark.parametrize(
    ("bad_line", "field", "message"),
    [
        ("[1, 2]", None, "expected a JSON object"),
        ({"question_id": "q1", "format": "hiprag"}, "response", "missing"),
        ({"question_id": "q1", "response": "x", "format": "react"}, "format", "unknown format 'react'"),
        (
            {"question_id": "nope", "response": "x", "format": "hiprag"},
            "question_id",
            "'nope' is not in dataset",
        ),
        ({"response": "x", "format": "hiprag"}, "question_id", "missing (give question_id, or question"),
        ({"question_id": "q1", "response": "x", "format": "hiprag", "run": 999999}, "run", "no run 999999"),
        (
            {"question_id": "q1", "response": "x", "format": "hiprag", "dataset": "other"},
            "dataset",
            "no dataset",
        ),
        (
            {"question_id": "q1", "response": "x", "format": "hiprag", "step": "7"},
            "step",
            "expected an integer",
        ),
    ],
)
def test_it_rolls_back_on_a_bad_line_naming_file_line_and_field(tmp_path, bad_line, field, message):
    QuestionFactory(external_id="q1", dataset__name="toy")
    good = {"question_id": "q1", "response": HIPRAG_RESPONSE, "format": "hiprag"}
    path = _write(tmp_path / "t.jsonl", [good, good, bad_line])
    with pytest.raises(DataImportError) as caught:
        trajectory_import(path=path, dataset_name="toy")
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), 3, field)
    assert message in str(caught.value)
    assert not Trajectory.objects.exists()
    assert not Step.objects.exists()


def test_it_resolves_a_question_id_across_datasets_when_unambiguous(tmp_path):
    QuestionFactory(external_id="only-here", dataset=DatasetFactory())
    path = _write(tmp_path / "t.jsonl", [{"question_id": "only-here", "response": "x", "format": "hiprag"}])
    trajectory_import(path=path)
    assert Trajectory.objects.get().question.external_id == "only-here"


def _scored_line(**extra):
    return {
        "question": "Capital of France?",
        "golden_answers": ["Paris"],
        "response": HIPRAG_RESPONSE,
        "format": "hiprag",
        **extra,
    }


def test_it_scores_a_line_that_names_its_method_from_its_verdicts(tmp_path):
    verdicts = [
        {"detector": "over_search", "step": 0, "outcome": "true", "judge_model": "labels"},
        {"detector": "under_search", "step": 1, "outcome": "false", "judge_model": "labels"},
    ]
    path = _write(tmp_path / "t.jsonl", [_scored_line(method="hiprag", verdicts=verdicts)])
    assert trajectory_import(path=path) == 1
    trajectory = Trajectory.objects.get()
    # HiPRAG Eq. 1 with A = F = 1: 1 + λp·N_corr/N = 1 + 0.4·1/2 (the search step was flagged over-search)
    assert trajectory.total_reward == pytest.approx(1.2)
    assert trajectory.reward_components["process_bonus"] == pytest.approx(0.2)
    assert sorted(trajectory.verdicts.values_list("step__index", "detector", "outcome")) == [
        (0, "over_search", "true"),
        (1, "under_search", "false"),
    ]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        # the bonus is due (right and well formed), so a missing step verdict is an error, not a "no"
        pytest.param({"method": "hiprag", "verdicts": []}, "verdicts", id="missing-verdict"),
        pytest.param({"method": "hiprag", "params": {"lambda_f": 2}}, "params.lambda_f", id="bad-param"),
        pytest.param({"method": "nope"}, "method", id="unknown-method"),
        pytest.param(
            {"verdicts": [{"detector": "vibes", "outcome": "true"}]}, "verdicts[0].detector", id="detector"
        ),
        pytest.param(
            {"verdicts": [{"detector": "answer", "outcome": "yes"}]}, "verdicts[0].outcome", id="outcome"
        ),
        pytest.param(
            {"verdicts": [{"detector": "over_search", "outcome": "true", "step": 9}]},
            "verdicts[0].step",
            id="step",
        ),
    ],
)
def test_it_names_the_field_of_a_bad_scored_line(tmp_path, extra, field):
    path = _write(tmp_path / "t.jsonl", [_scored_line(), _scored_line(**extra)])
    with pytest.raises(DataImportError) as caught:
        trajectory_import(path=path)
    assert (caught.value.line, caught.value.field) == (2, field)
    assert not Trajectory.objects.exists()  # the good first line was rolled back too


def test_it_names_the_line_of_bytes_that_are_not_utf8(tmp_path):
    QuestionFactory(external_id="q1", dataset__name="toy")
    good = json.dumps({"question_id": "q1", "response": HIPRAG_RESPONSE, "format": "hiprag"}).encode()
    path = tmp_path / "t.jsonl"
    path.write_bytes(good + b"\n" + b'{"question_id": "q1", "response": "caf\xe9", "format": "hiprag"}\n')
    with pytest.raises(DataImportError) as caught:
        trajectory_import(path=path, dataset_name="toy")
    assert caught.value.line == 2 and "not UTF-8" in str(caught.value)
    assert not Trajectory.objects.exists()
