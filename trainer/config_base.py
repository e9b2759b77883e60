"""The machinery of a dataclass config (a training run's, a warm start's): values checked against each field's type
(:func:`build`), errors naming the field (:class:`ConfigError`), dotted paths into nested values, and the reading of a
TOML, JSON or YAML file. :mod:`trainer.config` re-exports what code imports from there."""

from __future__ import annotations

import dataclasses
import importlib
import json
import tomllib
import typing
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type or out of range; ``field`` names it."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def config_help(text: str, *, label: str = "") -> dict[str, str]:
    """A field's help text and, where a form shows it under another name, its label (webapp.common.config_form)."""
    return {"help": text, "label": label} if label else {"help": text}


def choice(name: str, value: str, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ConfigError(name, f"must be one of {', '.join(options)}, got {value!r}")


def at_least(name: str, value: float, low: float) -> None:
    if value < low:
        raise ConfigError(name, f"must be ≥ {low}, got {value!r}")


def convert(name: str, annotation: Any, value: Any) -> Any:
    """Check one JSON/TOML value against a field's annotation (int, float, bool, str, list[str], dict, dataclass)."""
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        if not isinstance(value, dict):
            raise ConfigError(name, f"must be a table/object, got {value!r}")
        return build(annotation, value, f"{name}.")
    origin = typing.get_origin(annotation)
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(name, f"must be true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(name, f"must be an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(name, f"must be a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(name, f"must be a string, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(name, f"must be a list of strings, got {value!r}")
        return list(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(name, f"must be a table/object, got {value!r}")
        return dict(value)
    raise ConfigError(name, f"unsupported field type {annotation!r}")  # pragma: no cover


def build(cls: type[Any], values: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{prefix}{unknown[0]}", f"unknown key; expected one of {', '.join(fields)}")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in values:
            kwargs[name] = convert(f"{prefix}{name}", hints[name], values[name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{prefix}{name}", "is required")
    return cls(**kwargs)


def field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def set_path(values: dict[str, Any], path: str, value: Any) -> None:
    """``values["a"]["b"] = value`` for ``a.b``, making the sections on the way."""
    *sections, leaf = path.split(".")
    for name in sections:
        values = values.setdefault(name, {})
    values[leaf] = value


def get_path(values: dict[str, Any], path: str, default: Any = None) -> Any:
    *sections, leaf = path.split(".")
    for name in sections:
        values = values.get(name) or {}
    return values.get(leaf, default)


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` laid over it section by section (neither is changed)."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in ("options", "params"):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config_values(path: str | Path) -> dict[str, Any]:
    """The top-level table of a ``.toml``, ``.json`` or ``.yaml`` config file; errors name the file."""
    path = Path(path)
    suffix = path.suffix.lower()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError("CONFIG", f"cannot read {path}: {exc.strerror}") from None
    try:
        if suffix == ".toml":
            values = tomllib.loads(raw.decode())
        elif suffix == ".json":
            values = json.loads(raw)
        elif suffix in (".yaml", ".yml"):
            values = importlib.import_module("yaml").safe_load(raw)
        else:
            raise ConfigError("CONFIG", f"{path.name}: use a .toml, .json or .yaml file")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError("CONFIG", f"{path.name} is not valid {suffix[1:].upper()}: {exc}") from None
    except ImportError:
        raise ConfigError("CONFIG", "YAML needs PyYAML; use a .toml or .json file") from None
    except Exception as exc:  # PyYAML's own errors (no stubs to name the class)
        if type(exc).__module__.startswith("yaml"):
            raise ConfigError("CONFIG", f"{path.name} is not valid YAML: {exc}") from None
        raise
    if not isinstance(values, dict):
        raise ConfigError("CONFIG", f"{path.name} must hold a table/object at the top level")
    return values
