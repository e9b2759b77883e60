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
