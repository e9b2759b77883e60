"""Models that are not ready yet, as the apps above ``training`` tell it in their ``AppConfig.ready()``: checks
that refuse a model folder (the demo refuses its warm model while its warm start is still writing it) and notices
the model forms show (``{% load model_notices %}{% model_notices %}``: the demo's "the warm model is being
prepared"). The training, evaluation and experiment forms thus load and import none of those apps
(``tests/test_layers.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

_checks: dict[str, Callable[[Path], str | None]] = {}
_notices: dict[str, str] = {}


def model_check_register(name: str, check: Callable[[Path], str | None]) -> None:
    """Add ``check(path)``: a reason the folder cannot be used yet, or ``None``; a second one named ``name``
    replaces the first."""
    _checks[name] = check


def model_refusal(path: Path) -> str | None:
    """The first registered check's reason ``path`` cannot be used yet; ``None`` when none refuses it."""
    for check in _checks.values():
        if refusal := check(path):
            return refusal
    return None


def model_notice_register(name: str, template: str) -> None:
    """Add a notice the model forms show: ``template`` is rendered with an empty context and may render nothing."""
    _notices[name] = template


def model_notices() -> list[str]:
    """The registered notices' templates, in the order they were registered."""
    return list(_notices.values())
