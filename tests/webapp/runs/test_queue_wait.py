"""What a pending train or warm-start run waits for (webapp.runs.queue_wait), on its page and in the runs list."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.webapp.factories import RunFactory
from webapp.runs.models import Run
from webapp.runs.queue_wait import queue_wait, queue_waits

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)


def _run(name: str, *, kind: str, status: str, minutes_ago: float, progress: dict | None = None) -> Run:
    run = RunFactory(name=name, kind=kind, algorithm="sft", status=status, progress=progress or {})
    Run.objects.filter(pk=run.pk).update(created_at=NOW - dt.timedelta(minutes=minutes_ago))
    run.refresh_from_db()
    return run


def _warm_start(*, minutes_ago: float = 20) -> Run:
    """The demo's warm start at step 12 of 42, its heartbeat written now, 9 min left."""
    progress = {"phase": "train", "step": 12, "max_steps": 42, "eta_seconds": 540, "time": NOW.timestamp()}
    return _run(
        "demo warm start", kind="warm_start", status="running", minutes_ago=minutes_ago, progress=progress
    )


def test_a_run_behind_a_running_warm_start_says_which_and_how_far_along():
    warm = _warm_start()
    mine = _run("grpo", kind="train", status="pending", minutes_ago=2)
    wait = queue_wait(run=mine, now=NOW)
    assert wait is not None
    assert wait.message == (
        f"Queued behind run #{warm.pk} demo warm start (warm start), step 12 of 42, about 9 min left"
    )
    assert wait.short == f"behind #{warm.pk} (warm start) · about 9 min left"


def test_a_run_behind_a_running_run_and_one_pending_ahead_names_both():
    warm = _warm_start()
    ahead = _run("ppo", kind="train", status="pending", minutes_ago=5)
    mine = _run("grpo", kind="train", status="pending", minutes_ago=2)
    _run("later", kind="train", status="pending", minutes_ago=1)  # queued after mine: not ahead of it
    wait = queue_wait(run=mine, now=NOW)
    assert wait is not None
    assert wait.message == (
        f"Queued behind run #{warm.pk} demo warm start (warm start), step 12 of 42, about 9 min left; "
        f"then 1 run (#{ahead.pk} ppo) queued before it"
    )
    assert wait.short == f"behind #{warm.pk} (warm start) · about 9 min left · 1 more ahead"


def test_with_nothing_running_it_says_no_train_worker_has_taken_it():
    mine = _run("grpo", kind="train", status="pending", minutes_ago=35)
    _run("finished", kind="warm_start", status="finished", minutes_ago=90)
    wait = queue_wait(run=mine, now=NOW)
    assert wait is not None
    assert wait.message == "Waiting for a train worker: none has taken it for 35 min"
    assert wait.short == "no train worker has taken it for 35 min"


def test_only_pending_supervised_runs_wait_and_a_list_costs_one_query():
    _warm_start()
    running = Run.objects.get(name="demo warm start")
    evaluation = _run("eval", kind="eval", status="pending", minutes_ago=3)
    first = _run("a", kind="train", status="pending", minutes_ago=2)
    second = _run("b", kind="train", status="pending", minutes_ago=1)
    with CaptureQueriesContext(connection) as queries:
        waits = queue_waits(runs=[running, evaluation, first, second], now=NOW)
    assert len(queries) == 1
    assert set(waits) == {first.pk, second.pk}
    assert [run.pk for run in waits[second.pk].pending_ahead] == [first.pk]
    with CaptureQueriesContext(connection) as queries:
        assert queue_wait(run=running, now=NOW) is None
    assert len(queries) == 0


def test_the_pending_run_page_and_its_polled_status_say_what_it_waits_for(researcher_client):
    warm = _warm_start()
    mine = _run("grpo", kind="train", status="pending", minutes_ago=2)
    expected = f"Queued behind run #{warm.pk} demo warm start (warm start), step 12 of 42"
    page = researcher_client.get(f"/runs/{mine.pk}/").content.decode()
    assert 'id="run-queued"' in page
    assert expected in page
    fragment = researcher_client.get(f"/runs/{mine.pk}/status/").content.decode()
    assert expected in fragment
    assert 'hx-trigger="every 3s"' in fragment  # a pending run's status keeps refreshing
    listing = researcher_client.get("/").content.decode()
    assert f"behind #{warm.pk} (warm start)" in listing


def test_a_running_runs_page_says_nothing_of_a_queue(researcher_client):
    warm = _warm_start()
    page = researcher_client.get(f"/runs/{warm.pk}/").content.decode()
    assert 'id="run-queued"' not in page


def test_a_run_queued_seconds_ago_with_nothing_running_is_queued_not_workerless():
    # queued 6 s ago: an idle worker takes it any moment
    mine = _run("grpo", kind="train", status="pending", minutes_ago=0.1)
    wait = queue_wait(run=mine, now=NOW)
    assert wait is not None and not wait.no_worker_suspected
    assert (wait.message, wait.short) == ("Queued for a train worker", "queued")
    later = queue_wait(run=mine, now=NOW + dt.timedelta(seconds=30))
    assert later is not None and later.no_worker_suspected
    assert later.message == "Waiting for a train worker: none has taken it for 36 s"


def test_the_run_page_asks_for_a_worker_only_once_the_run_has_waited(researcher_client):
    fresh = RunFactory(name="fresh", kind="train", algorithm="grpo", status="pending")  # created now
    page = researcher_client.get(f"/runs/{fresh.pk}/").content.decode()
    assert "Queued for a train worker" in page and "is a Celery worker" not in page
    stale = _run("stale", kind="train", status="pending", minutes_ago=35)
    Run.objects.filter(pk=fresh.pk).delete()
    page = researcher_client.get(f"/runs/{stale.pk}/").content.decode()
    assert "none has taken it for" in page and "is a Celery worker on the <code>train</code> queue" in page
