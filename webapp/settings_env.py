"""Strict readers of environment variables for :mod:`webapp.settings`: a value that cannot be parsed raises
``ImproperlyConfigured`` naming the variable, so a bad deployment stops at start-up instead of running on a default.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """The variable's value; unset and empty are the same (so .env files may list a variable without a value)."""
    return os.environ.get(name, "").strip() or default


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use one of: 1 0 true false yes no on off)")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={value} is above the maximum {maximum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name, "")
    if not raw.strip():
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default).lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of: {', '.join(choices)}")
    return value


def env_path(name: str, default: Path) -> Path:
    raw = env_str(name)
    return Path(raw).expanduser().resolve() if raw else default


def env_url(name: str, default: str, schemes: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if value and urlsplit(value).scheme not in schemes:
        raise ImproperlyConfigured(f"{name}={value!r} must be a URL with scheme {' or '.join(schemes)}")
    return value
