"""``{{ run.progress|progress_view }}``: the trainer's heartbeat as the run page shows it.

A filter rather than a ``Run`` property, so the runs app's models need not import the training app's display code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

from webapp.training.progress_view import ProgressView
from webapp.training.progress_view import progress_view as _progress_view

register = template.Library()


@register.filter
def progress_view(progress: Mapping[str, Any] | None) -> ProgressView | None:
    return _progress_view(progress)
