"""Why a run may not start from a model folder yet: checks the apps above ``training`` register in their
``AppConfig.ready()`` (the demo refuses its warm model while its warm start is still writing it), so the training
forms import none of those apps (``tests/test_layers.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

_checks: dict[str, Callable[[Path], str | None]] = {}


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
