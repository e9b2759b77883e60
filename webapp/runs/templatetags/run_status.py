"""The run status fragment's tags: ``{{ run.progress|progress_view }}`` (the trainer's heartbeat as a progress
line) and ``{{ run|supervisor_status }}`` (the template the run's supervisor adds to the fragment, or ``""``:
training's quiet, stopping and revoke parts, registered in :mod:`webapp.runs.hooks`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

from webapp.runs import hooks
from webapp.runs.models import Run
from webapp.runs.progress_view import ProgressView
from webapp.runs.progress_view import progress_view as _progress_view

register = template.Library()


@register.filter
def progress_view(progress: Mapping[str, Any] | None) -> ProgressView | None:
    return _progress_view(progress)


@register.filter
def supervisor_status(run: Run) -> str:
    supervisor = hooks.supervisor_for(run.kind)
    return supervisor.status_template if supervisor else ""
