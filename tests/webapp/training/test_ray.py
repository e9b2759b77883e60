"""The ``ray`` executor on a local single-node Ray cluster (CPU), started once for these tests and stopped after.

A tiny-random GRPO run submitted through the training service reaches ``finished`` with its curves and samples stored
while searchlab's web process is restarted mid-run; a stop ends the Ray job and marks the run cancelled; a job
killed from outside is marked crashed within two heartbeats of the supervisor."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path
from unittest import mock

import pytest

from tests.webapp.training.live import RestartableServer, free_port
from webapp.runs.models import MetricPoint, Run
from webapp.training.forms import TrainingRunForm
from webapp.training.models import IngestedSample, TrainingProcess
from webapp.training.services import training_run_create, training_stop_request
from webapp.training.supervisor import supervise
from webapp.trajectories.models import Trajectory

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True)]

POLL = 1.0  # the supervisor's heartbeat in these tests (RAY_POLL_SECONDS in production)


@pytest.fixture(scope="module")
def ray_cluster():
    """A head node with the dashboard (the Jobs API) and 2 CPUs for this module's tests, stopped after them (not
    at the session's end: an idle cluster would take memory and CPU from the rest of the suite)."""
    import ray

    started = time.monotonic()
    temp = Path(f"/tmp/ray-searchlab-{os.getpid()}")
    context = ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=True,
        dashboard_host="127.0.0.1",
        dashboard_port=free_port(),
        _temp_dir=str(temp),
        log_to_driver=False,
        configure_logging=False,
    )
    print(f"\nRay head with dashboard started in {time.monotonic() - started:.1f} s")
    try:
        yield f"http://{context.dashboard_url}"
    finally:
        stopping = time.monotonic()
        ray.shutdown()
        print(f"\nRay stopped in {time.monotonic() - stopping:.1f} s")
        shutil.rmtree(temp, ignore_errors=True)  # the session's logs and sockets


@pytest.fixture
def live(settings):
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    server = RestartableServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def on_ray(ray_cluster, live, settings, tmp_path):
    settings.RAY_ADDRESS = ray_cluster
    settings.TRAINING_INGEST_URL = live.url
    settings.TRAINING_RUNS_DIR = tmp_path / "runs"
    settings.TRAINING_STOP_GRACE_SECONDS = 10
    return ray_cluster


def _create(form_data: dict, *, steps: int, supervise_now: bool) -> Run:
    """A run created through the form and the training service, as the new-run page does, on the ray executor."""
    form = TrainingRunForm(data={**form_data, "executor": "ray", "max_steps": steps})
    assert form.is_valid(), form.errors
    assert form.fields["executor"].choices[1][0] == "ray"
    cleaned = form.cleaned_data
    with mock.patch("webapp.training.tasks.training_supervise_task.delay") as delay:
        if supervise_now:
            delay.side_effect = lambda run_id: supervise(run_id, poll_seconds=POLL)
        return training_run_create(
            user=None,
            name=cleaned["name"],
            config=form.run_config(output_dir="(the run's folder)"),
            executor=cleaned["executor"],
        )


def _in_thread(run: Run) -> threading.Thread:
    def target() -> None:
        from django.db import connection

        try:
            supervise(run.pk, poll_seconds=POLL)
        finally:
            connection.close()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _wait(condition, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_tiny_grpo_run_finishes_on_ray_through_a_web_restart(on_ray, live, form_data, tmp_path):
    outage: dict[str, float] = {}

    def restart_the_web_process_mid_run() -> None:
        from django.db import connection

        try:
            _wait(lambda: MetricPoint.objects.filter(key="reward/mean").exists(), 240, "the first metric")
        finally:
            connection.close()  # this thread's own connection (PostgreSQL drops the test database after)
        live.stop()
        outage["down"] = time.monotonic()
        time.sleep(3.0)
        live.start()
        outage["seconds"] = time.monotonic() - outage["down"]

    restarter = threading.Thread(target=restart_the_web_process_mid_run, daemon=True)
    restarter.start()
    started = time.monotonic()
    run = _create(form_data, steps=6, supervise_now=True)  # the supervisor runs to the job's end here
    restarter.join(timeout=30)

    run.refresh_from_db()
    process = TrainingProcess.objects.get(run=run)
    assert run.status == Run.Status.FINISHED, run.error
    assert process.executor == "ray" and process.job_id.startswith(f"searchlab-run-{run.pk}-")
    output = Path(run.config["output_dir"])
    written = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    stored = MetricPoint.objects.filter(run=run)
    assert stored.count() == len({(row["step"], row["key"]) for row in written}) > 0  # no metric lost
    assert sorted(set(stored.filter(key="reward/mean").values_list("step", flat=True))) == [1, 2, 3, 4, 5, 6]
    samples = len((output / "samples.jsonl").read_text().splitlines())
    assert (
        Trajectory.objects.filter(run=run).count()
        == samples
        == IngestedSample.objects.filter(run=run).count()
    )
    assert run.progress.get("step") == 6 and "Traceback" not in run.log_tail
    print(
        f"\nRay run: {time.monotonic() - started:.1f} s, {stored.count()} metric points and {samples} samples "
        f"stored; web process down {outage.get('seconds', 0):.1f} s mid-run"
    )
    assert outage.get("seconds", 0) >= 3.0  # the restart really happened while the run reported


def test_a_stop_ends_the_ray_job_and_marks_the_run_cancelled(on_ray, form_data):
    from ray.job_submission import JobSubmissionClient

    run = _create(form_data, steps=200, supervise_now=False)
    thread = _in_thread(run)
    _wait(lambda: MetricPoint.objects.filter(run=run).exists(), 240, "the run to report")
    training_stop_request(run_id=run.pk)
    thread.join(timeout=120)
    assert not thread.is_alive()
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    job = TrainingProcess.objects.get(run=run).job_id
    assert JobSubmissionClient(on_ray).get_job_status(job).value == "STOPPED"


def test_a_job_killed_from_outside_is_marked_crashed_within_two_heartbeats(on_ray, form_data):
    import psutil

    run = _create(form_data, steps=200, supervise_now=False)
    thread = _in_thread(run)
    _wait(lambda: MetricPoint.objects.filter(run=run).exists(), 240, "the run to report")
    # What the OOM killer or an operator's kill -9 does: the job's processes die, nobody asked searchlab.
    mine = [
        p
        for p in psutil.process_iter(["pid", "cmdline"])
        if (p.info["cmdline"] or [])[1:3] == ["-m", "trainer.report_client"]
        and f"--run-id {run.pk} " in " ".join(p.info["cmdline"])
    ]
    assert len(mine) == 1
    doomed = [mine[0], *mine[0].children(recursive=True)]
    killed_at = time.monotonic()
    for process in doomed:
        os.kill(process.pid, signal.SIGKILL)
    _wait(lambda: Run.objects.get(pk=run.pk).status != Run.Status.RUNNING, 60, "the run to end")
    noticed = time.monotonic() - killed_at
    thread.join(timeout=30)
    run.refresh_from_db()
    print(f"\nkilled job noticed after {noticed:.1f} s (heartbeat {POLL} s)")
    assert run.status == Run.Status.CRASHED, run.error
    assert "Ray job died" in run.error
    assert noticed <= 2 * POLL + 1.0  # two heartbeats, and Ray's own poll of the entrypoint


def test_a_run_whose_supervisor_died_gets_its_end_from_ray(on_ray, live, form_data):
    """The train worker died after submitting: the job goes on reporting over HTTP, and the beat's check records
    its end from Ray instead of waiting for the heartbeat timeout and calling a finished run crashed."""
    import socket
    import subprocess
    import sys

    from ray.job_submission import JobSubmissionClient

    from webapp.runs.services import run_mark_started
    from webapp.training import executors, ingest
    from webapp.training.tasks import check_crashed_runs_task

    run = _create(form_data, steps=2, supervise_now=False)
    run_mark_started(run_id=run.pk)
    job = executors.submit(run, url=live.url, token=ingest.ingest_token(run.pk), questions="")
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    TrainingProcess.objects.filter(run=run).update(
        job_id=job, hostname=socket.gethostname(), supervisor_pid=int(gone.stdout)
    )
    client = JobSubmissionClient(on_ray)
    _wait(lambda: client.get_job_status(job).value in ("SUCCEEDED", "FAILED"), 240, "the job to end")

    check_crashed_runs_task()

    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED, run.error
    assert sorted(
        set(MetricPoint.objects.filter(run=run, key="reward/mean").values_list("step", flat=True))
    ) == [1, 2]
