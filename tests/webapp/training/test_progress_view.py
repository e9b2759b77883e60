"""The run page's progress line from the trainer's heartbeat, and the log tail without library noise."""

from __future__ import annotations

from pathlib import Path

from webapp.runs.progress_view import duration, progress_view
from webapp.training.ingest import log_tail


def test_it_says_which_phase_of_which_step_with_counts_and_an_eta() -> None:
    view = progress_view(
        {
            "phase": "generate",
            "done": 2,
            "total": 5,
            "detail": "6/8 rollouts active",
            "step": 3,
            "max_steps": 10,
            "step_elapsed": 42.0,
            "eta_seconds": 610.0,
            "counters": {"judge_calls": [12, 20]},
        }
    )
    assert view is not None
    assert view.phase == "generating turn 2 of ≤ 5 (6/8 rollouts active)"
    assert view.judge_calls == "12 of 20 judge calls answered"
    assert (view.step_elapsed, view.eta, view.percent) == ("42 s", "about 10 min left", 20)


def test_judging_shows_its_counts_once_and_no_eta_before_a_step_has_finished() -> None:
    view = progress_view(
        {
            "phase": "judge",
            "done": 3,
            "total": 9,
            "step": 1,
            "max_steps": 4,
            "counters": {"judge_calls": [3, 9]},
        }
    )
    assert view is not None
    assert (view.phase, view.judge_calls, view.eta) == ("judging: 3 of 9 calls answered", "", "")
    assert progress_view({}) is None and progress_view(None) is None


def test_durations_read_naturally() -> None:
    assert [duration(s) for s in (0.4, 75, 600, 7200)] == ["0 s", "75 s", "10 min", "2.0 h"]


def test_the_log_tail_leaves_out_known_library_warnings_but_keeps_tracebacks(tmp_path: Path) -> None:
    log = tmp_path / "trainer.log"
    log.write_text(
        "/x/site-packages/trl/grpo.py:12: FutureWarning: `foo` is deprecated\n"
        "  warnings.warn(\n"
        "step 1 done\n"
        "Traceback (most recent call last):\n"
        '  File "trainer/train.py", line 9, in main\n'
        "    trainer.train()\n"
        "RuntimeError: boom\n"
    )
    assert log_tail(log).splitlines() == [
        "step 1 done",
        "Traceback (most recent call last):",
        '  File "trainer/train.py", line 9, in main',
        "    trainer.train()",
        "RuntimeError: boom",
    ]


def test_a_heartbeat_ages_while_a_long_turn_generates_without_writing_one() -> None:
    heartbeat = {
        "phase": "generate",
        "step": 1,
        "max_steps": 3,
        "step_elapsed": 0.0,
        "eta_seconds": 300.0,
        "time": 1000.0,
    }
    view = progress_view(heartbeat, now=1045.0)
    assert view is not None and (view.step_elapsed, view.eta) == ("45 s", "about 4 min left")
    assert progress_view(heartbeat, now=990.0).step_elapsed == "0 s"  # type: ignore[union-attr]  # clock skew
    finished = progress_view({**heartbeat, "phase": "done", "step_elapsed": 12.0}, now=5000.0)
    assert finished is not None and finished.step_elapsed == "12 s"  # a finished run's time does not grow
