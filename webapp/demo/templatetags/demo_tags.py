"""``{% warm_model_notice %}``: the forms' line saying that the demo's warm model is being prepared."""

from __future__ import annotations

from typing import Any

from django import template

from webapp.demo.selectors import warm_model_preparing

register = template.Library()


@register.inclusion_tag("demo/_warm_model_notice.html")
def warm_model_notice() -> dict[str, Any]:
    return {"preparing": warm_model_preparing()}
