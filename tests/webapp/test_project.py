"""Project-wide wiring: admin pages, Celery queues and routes."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin

from webapp.celery import app as celery_app


@pytest.mark.parametrize(
    "model",
    [m for m in apps.get_models() if m.__module__.startswith("webapp.")],
    ids=lambda m: m._meta.label,
)
def test_it_has_an_admin_page_for_every_model(model):
    assert admin.site.is_registered(model)


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        ("webapp.imports.tasks.import_job_run_task", "default"),
        ("webapp.api.tasks.score_job_run_task", "default"),
        ("webapp.trajectories.tasks.judge_trajectory", "judge"),
        ("webapp.corpora.tasks.index_build", "retrieval"),
        ("webapp.runs.tasks.run_train", "train"),
    ],
)
def test_it_routes_tasks_to_their_queues(task, queue):
    route = celery_app.amqp.router.route({}, task)
    assert route["queue"].name == queue


def test_it_declares_the_four_queues():
    assert sorted(q.name for q in celery_app.conf.task_queues) == ["default", "judge", "retrieval", "train"]
