"""An index whose build stopped beating is failed by the periodic check, then rebuilt or deleted from its page."""

from __future__ import annotations

import datetime as dt
from unittest import mock

import pytest
from django.utils import timezone

from tests.webapp.factories import CorpusFactory
from webapp.corpora.models import Index
from webapp.corpora.services import index_mark_crashed

pytestmark = pytest.mark.django_db


def _index(tmp_path, status, beat_seconds_ago):
    folder = tmp_path / "index"
    folder.mkdir(exist_ok=True)
    beat = timezone.now() - dt.timedelta(seconds=beat_seconds_ago)
    return Index.objects.create(
        corpus=CorpusFactory(),
        name=f"i{status}{beat_seconds_ago}",
        kind="bm25",
        status=status,
        path=str(folder),
        started_at=beat,
        heartbeat_at=beat,
    )


def test_a_build_that_stopped_beating_is_failed_and_a_beating_one_is_left_alone(settings, tmp_path):
    settings.INDEX_HEARTBEAT_TIMEOUT_SECONDS = 60
    dead = _index(tmp_path, Index.Status.BUILDING, 600)
    alive = _index(tmp_path, Index.Status.BUILDING, 5)

    assert index_mark_crashed() == [dead.pk]

    dead.refresh_from_db()
    assert dead.status == "failed" and "no progress for 6" in dead.error and "Rebuild or delete" in dead.error
    assert Index.objects.get(pk=alive.pk).status == "building"


def test_beat_runs_both_checks_every_minute_and_cleans_old_uploads_hourly(settings):
    schedule = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule == {
        "webapp.training.tasks.check_crashed_runs_task": 60.0,
        "webapp.corpora.tasks.check_crashed_indexes_task": 60.0,
        "webapp.imports.tasks.uploads_clean_task": 3600.0,
    }


def test_a_failed_index_is_rebuilt_or_deleted_from_its_page(
    researcher_client, tmp_path, django_capture_on_commit_callbacks
):
    failed = _index(tmp_path, Index.Status.FAILED, 600)
    (tmp_path / "index" / "half.faiss").write_text("x")
    with (
        mock.patch("webapp.corpora.tasks.index_build_task.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = researcher_client.post(f"/corpora/indexes/{failed.pk}/rebuild/")
    assert response.status_code == 302
    failed.refresh_from_db()
    assert (failed.status, failed.error) == ("pending", "") and not (tmp_path / "index").exists()
    delay.assert_called_once_with(failed.pk)

    Index.objects.filter(pk=failed.pk).update(status=Index.Status.BUILDING)
    busy = researcher_client.post(f"/corpora/indexes/{failed.pk}/delete/", follow=True)
    assert "is building" in busy.content.decode() and Index.objects.filter(pk=failed.pk).exists()

    Index.objects.filter(pk=failed.pk).update(status=Index.Status.FAILED)
    with django_capture_on_commit_callbacks(execute=True):
        researcher_client.post(f"/corpora/indexes/{failed.pk}/delete/")
    assert not Index.objects.filter(pk=failed.pk).exists()
