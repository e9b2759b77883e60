"""The runs list's headline cells, written in one call per row (the template engine's per-cell cost, 200 cells for
50 runs, was most of the page's time)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from webapp.runs.selectors import HeadlineCell

register = template.Library()

_SVG = (
    '<svg class="sparkline" width="80" height="18" viewBox="0 0 80 18" aria-hidden="true">'
    '<polyline points="{}"/></svg>'
)


@register.simple_tag
def headline_cells(cells: Sequence[HeadlineCell]) -> SafeString:
    """One ``<td>`` per headline: the number, then its trend line (none for fewer than two points)."""
    return format_html_join(
        "",
        '<td class="num headline" title="{}">{}{}</td>',
        ((c.title, c.text, format_html(_SVG, c.points) if c.points else "") for c in cells),
    )


@register.filter
def model_short(name: str) -> str:
    """A model's last path component ("/srv/models/SmolLM2-135M-Instruct-warm" → "SmolLM2-135M-Instruct-warm"), so a
    local path does not fill the column; the cell's title keeps the whole name."""
    return PurePosixPath(name.rstrip("/")).name or name
