"""``{% audit_drift run %}``: the run page's small panel of judge drift from its audits stratified by training
step, so the run page needs no view change."""

from __future__ import annotations

from typing import Any

from django import template

from webapp.audits.strata import run_drift

register = template.Library()


@register.inclusion_tag("audits/_run_drift.html")
def audit_drift(run: Any) -> dict[str, Any]:
    return {"panels": run_drift(run_id=run.pk)}
