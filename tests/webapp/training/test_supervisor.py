"""The supervisor against a fake trainer: metrics, samples, final statuses, stopping, and crash detection."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys

import pytest
from django.utils import timezone

from tests.webapp.factories import QuestionFactory
from webapp.runs.models import MetricPoint, Run
from webapp.training.ingest import read_new_lines
from webapp.training.models import TrainingProcess
from webapp.training.services import training_mark_crashed, training_stop_request
from webapp.training.supervisor import supervise
from webapp.trajectories.models import JudgeVerdict, Trajectory

pytestmark = pytest.mark.django_db

FAST = {"poll_seconds": 0.05}


def test_it_stores_metrics_and_samples_and_finishes(make_train_run):
    question = QuestionFactory(external_id="q-paris")
    run, command = make_train_run("--steps", "3", dataset_id=question.dataset_id)

    assert supervise(run.pk, command=command, **FAST) == Run.Status.FINISHED

    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.started_at and run.finished_at
    keys = set(MetricPoint.objects.filter(run=run).values_list("key", flat=True))
    assert keys == {"reward/mean", "reward/std", "osr", "usr"}  # the NaN kl was dropped
    assert list(MetricPoint.objects.filter(run=run, key="reward/mean").values_list("step", flat=True)) == [
        1,
        2,
        3,
    ]
    assert "step 3 done" in run.log_tail
    trajectory = Trajectory.objects.get(run=run)
    assert (trajectory.training_step, trajectory.question_id, trajectory.total_reward) == (
        1,
        question.pk,
        0.7,
    )
    assert trajectory.n_searches == 1 and trajectory.exact_match is True
    assert list(trajectory.steps.values_list("reward", flat=True)) == [0.2, 0.5]
    outcomes = dict(JudgeVerdict.objects.filter(trajectory=trajectory).values_list("detector", "outcome"))
    assert outcomes == {
        "over_search": "true",
        "under_search": "error",
    }  # "unparseable" is an error, never a "no"
    process = TrainingProcess.objects.get(run=run)
    assert process.exit_code == 0 and process.metrics_offset > 0 and process.pid


def test_it_marks_a_failed_trainer_with_the_end_of_its_log(make_train_run):
    run, command = make_train_run("--steps", "1", "--exit", "3")

    assert supervise(run.pk, command=command, **FAST) == Run.Status.FAILED

    run.refresh_from_db()
    assert "trainer exited with 3" in run.error
    assert "RuntimeError: fake failure" in run.error


def test_it_stops_a_trainer_cooperatively(make_train_run):
    run, command = make_train_run("--steps", "1", "--hang")
    TrainingProcess.objects.filter(run=run).update(stop_requested_at=timezone.now())

    assert supervise(run.pk, command=command, grace_seconds=30, **FAST) == Run.Status.CANCELLED

    assert TrainingProcess.objects.get(run=run).killed is False  # SIGINT was enough


def test_it_kills_a_trainer_that_ignores_the_stop_after_the_grace_period(make_train_run):
    run, command = make_train_run("--steps", "1", "--hang", "--ignore-sigint")
    # SIGINT is ignored from before the trainer's interpreter starts (an ignored signal survives exec, and Python
    # keeps it ignored), so a stop sent at once cannot land before the trainer's own handler would be installed.
    command = ["sh", "-c", 'trap "" INT; exec "$0" "$@"', *command]
    TrainingProcess.objects.filter(run=run).update(stop_requested_at=timezone.now())

    assert supervise(run.pk, command=command, grace_seconds=0.3, **FAST) == Run.Status.CANCELLED

    process = TrainingProcess.objects.get(run=run)
    assert process.killed is True and process.exit_code == -9


def test_it_does_not_start_a_run_cancelled_while_pending(make_train_run):
    run, command = make_train_run()
    assert training_stop_request(run_id=run.pk).status == Run.Status.CANCELLED

    assert supervise(run.pk, command=command, **FAST) == Run.Status.CANCELLED
    assert TrainingProcess.objects.get(run=run).pid is None


def test_it_asks_a_running_trainer_to_stop_without_ending_the_run(make_train_run):
    run, _ = make_train_run()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)

    assert training_stop_request(run_id=run.pk).status == Run.Status.RUNNING
    assert TrainingProcess.objects.get(run=run).stop_requested_at is not None


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.mark.parametrize(
    ("hostname", "supervisor_pid", "crashed"),
    [
        (socket.gethostname(), "dead", True),  # its worker died on this machine
        (socket.gethostname(), "self", False),  # alive, only slow to beat: not a crash
        ("another-machine", "self", True),  # cannot see the process: the stale heartbeat decides
    ],
)
def test_it_marks_a_run_crashed_when_its_heartbeat_stopped_and_its_supervisor_is_gone(
    make_train_run, hostname, supervisor_pid, crashed
):
    run, _ = make_train_run()
    stale = timezone.now() - dt.timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, heartbeat_at=stale)
    pid = _dead_pid() if supervisor_pid == "dead" else os.getpid()
    TrainingProcess.objects.filter(run=run).update(hostname=hostname, supervisor_pid=pid)

    assert training_mark_crashed() == ([run.pk] if crashed else [])
    run.refresh_from_db()
    assert run.status == (Run.Status.CRASHED if crashed else Run.Status.RUNNING)


def test_it_leaves_a_fresh_heartbeat_alone(make_train_run):
    run, _ = make_train_run()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, heartbeat_at=timezone.now())
    TrainingProcess.objects.filter(run=run).update(hostname="elsewhere", supervisor_pid=1)

    assert training_mark_crashed() == []


def test_it_reads_only_complete_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\nnot json\n{"step": 2, "key": "half')

    rows, offset = read_new_lines(path, 0)
    assert rows == [{"step": 1}]  # the bad line is skipped, the unfinished one waits
    assert offset == len('{"step": 1}\nnot json\n')
    with path.open("a") as handle:
        handle.write('"}\n')
    assert read_new_lines(path, offset)[0] == [{"step": 2, "key": "half"}]


def test_it_routes_the_supervisor_to_the_train_queue_and_the_crash_check_elsewhere():
    from webapp.celery import app

    route = app.amqp.router.route
    assert route({}, "webapp.training.tasks.training_supervise_task")["queue"].name == "train"
    assert route({}, "webapp.training.tasks.check_crashed_runs_task")["queue"].name == "default"


def test_it_launches_with_accelerate_on_gpu_machines(settings, tmp_path):
    from webapp.training.supervisor import trainer_command

    settings.TRAINING_LAUNCHER = "accelerate"
    settings.TRAINING_ACCELERATE_ARGS = ["--num_processes=2"]

    assert trainer_command(tmp_path / "config.json")[1:] == [
        "-m",
        "accelerate.commands.launch",
        "--num_processes=2",
        "-m",
        "trainer.train",
        str(tmp_path / "config.json"),
    ]
