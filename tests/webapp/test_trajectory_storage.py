"""trajectory_bulk_create stores steps, per-step judge texts and verdicts in one pass."""

from __future__ import annotations

import pytest

from scoring.formats import parse
from webapp.trajectories.models import JudgeVerdict, Trajectory
from webapp.trajectories.services import TrajectoryInput, VerdictInput, trajectory_bulk_create

HIPRAG = (
    "<think>\n<step>\n<reasoning>who</reasoning>\n<search>Titanic director</search>\n<context>Doc 1 Cameron"
    "</context>\n<conclusion>James Cameron</conclusion>\n</step>\n<step>\n<reasoning>so</reasoning>\n"
    "<conclusion>done</conclusion>\n</step>\n</think>\n<answer>James Cameron</answer>"
)


@pytest.mark.django_db
def test_it_stores_verdicts_on_their_steps_and_the_trajectory() -> None:
    item = TrajectoryInput(
        parsed=parse("hiprag", HIPRAG),
        golden_answers=["James Cameron"],
        verdicts=(
            VerdictInput("over_search", "true", "judge-a", step_index=0, raw_reply="<answer>True</answer>"),
            VerdictInput("under_search", "error", "judge-a", step_index=1, raw_reply="timeout after 3 tries"),
            VerdictInput("answer", "true", "judge-b"),
        ),
        regenerated_answers={0: "Cameron directed it"},
    )
    assert trajectory_bulk_create(items=[item]) == 1

    trajectory = Trajectory.objects.get()
    by_detector = {
        v.detector: v for v in JudgeVerdict.objects.filter(trajectory=trajectory).select_related("step")
    }
    assert by_detector["over_search"].step is not None and by_detector["over_search"].step.index == 0
    assert by_detector["under_search"].outcome == "error"  # a failed judge call is kept as an error
    assert by_detector["answer"].step is None
    assert trajectory.steps.get(index=0).regenerated_answer == "Cameron directed it"


@pytest.mark.django_db
def test_it_refuses_a_verdict_for_a_step_that_does_not_exist() -> None:
    item = TrajectoryInput(
        parsed=parse("hiprag", HIPRAG), verdicts=(VerdictInput("over_search", "true", "j", step_index=7),)
    )
    with pytest.raises(ValueError, match="step 7"):
        trajectory_bulk_create(items=[item])


@pytest.mark.django_db
def test_a_generated_nul_character_is_stored_as_a_replacement_character():
    """PostgreSQL text and JSON refuse NUL; a random policy generates it. One character for one keeps positions."""
    from tests.webapp.factories import RunFactory

    run = RunFactory()
    text = "<think>a\x00b</think><answer>Pa\x00ris</answer>"
    trajectory_bulk_create(
        items=[
            TrajectoryInput(
                run_id=run.pk,
                question_id=None,
                dataset_id=None,
                question_text="q\x00",
                golden_answers=("Paris",),
                parsed=parse("search_r1", text),
            )
        ]
    )
    stored = Trajectory.objects.get(run=run)
    assert stored.raw_text == text.replace("\x00", "\ufffd") and len(stored.raw_text) == len(text)
    assert "\x00" not in stored.question_text + stored.final_answer


@pytest.mark.django_db
def test_a_key_logged_twice_at_one_step_is_stored_once_with_its_last_value():
    """TRL's end-of-training summary repeats ``epoch`` at the last step; PostgreSQL's upsert refuses a row twice."""
    from tests.webapp.factories import RunFactory
    from webapp.runs.models import MetricPoint
    from webapp.training.services import training_metrics_store

    run = RunFactory()
    rows = [
        {"step": 20, "time": 1.0, "key": "epoch", "value": 1.95},
        {"step": 20, "time": 2.0, "key": "epoch", "value": 2.0},
        {"step": 20, "time": 2.0, "key": "loss", "value": 0.3},
    ]
    assert training_metrics_store(run_id=run.pk, rows=rows, offset=0) == 2
    stored = dict(MetricPoint.objects.filter(run=run).values_list("key", "value"))
    assert stored == {"epoch": 2.0, "loss": 0.3}
