"""The Celery app. Configuration comes from Django settings (``CELERY_*``), which read the environment."""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("searchlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _create_filesystem_broker_folders(sender: Celery, **kwargs: object) -> None:
    # kombu's filesystem transport does not create its folders; both the producer and the worker need them.
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        folder = (sender.conf.broker_transport_options or {}).get(key)
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
