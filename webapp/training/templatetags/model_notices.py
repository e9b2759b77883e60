"""``{% model_notices %}``: the notices the apps above training register on the model forms
(:func:`webapp.training.model_checks.model_notice_register`), e.g. the demo's warm model being prepared."""

from __future__ import annotations

from typing import Any

from django import template

from webapp.training import model_checks

register = template.Library()


@register.inclusion_tag("training/_model_notices.html")
def model_notices() -> dict[str, Any]:
    return {"notices": model_checks.model_notices()}
