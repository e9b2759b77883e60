"""``{{ run|quiet_for }}`` and ``{{ run|reports_over_http }}``: how the run page speaks of a run whose trainer reports
over HTTP (webapp.training.reporting) — quiet for a while rather than crashed, a Stop it hears on its next report."""

from __future__ import annotations

from django import template

from webapp.runs.models import Run
from webapp.training import reporting

register = template.Library()


@register.filter
def quiet_for(run: Run) -> str:
    """``3 min`` when a running reported run has not reported for longer than the heartbeat timeout, else ``""``."""
    seconds = reporting.quiet_seconds(run)
    return reporting.duration(seconds) if seconds is not None else ""


@register.filter
def reports_over_http(run: Run) -> bool:
    return reporting.is_reported(run)


@register.simple_tag
def quiet_limit() -> str:
    return reporting.duration(reporting.quiet_limit_seconds())
