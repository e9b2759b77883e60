"""Form fields derived from the trainer's own config (trainer.config.RunConfig), so a setting is declared once.

A form lists the dotted paths it shows (``config_fields(("training.max_steps", *BUDGETS))``); each field's type,
initial value, range, help text and label come from the config's dataclass field, with per-form overrides where a form
wants another default (the new-run form starts at lr 1e-5). The field remembers its path, so a form turns its
cleaned data back into the config's nested dict (:func:`config_values`) and a :class:`ConfigError` back onto the
field that shows it (:func:`error_field`) without a hand-written table of names.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from trainer.config import config_field, field_default, set_path

PATH_ATTRIBUTE = "config_path"


def form_name(path: str) -> str:
    """The form field's name: the config field's own (``rollout.topk`` → ``topk``)."""
    return path.rsplit(".", 1)[-1]


def config_form_field(path: str, *, root: type[Any] | None = None, **overrides: Any) -> forms.Field:
    """A Django field for the config field at ``path`` of ``root`` (default RunConfig): int, float, bool or str;
    with ``choices`` (values, or (value, label) pairs; default: the field's metadata) a choice; a list of strings
    with choices, a multiple choice (check boxes)."""
    f, annotation = config_field(path, root)
    options: dict[str, Any] = {
        "initial": field_default(f),
        "help_text": f.metadata.get("help", ""),
        "required": annotation is not bool,
    }
    if f.metadata.get("label"):
        options["label"] = f.metadata["label"]
    options.update(_range_options(f.metadata))
    choices = overrides.pop("choices", f.metadata.get("choices"))
    options.update(overrides)
    field: forms.Field
    if typing.get_origin(annotation) is list and choices is not None:  # names, each from a fixed set
        options["required"] = overrides.get("required", False)
        options.setdefault("widget", forms.CheckboxSelectMultiple)
        pairs = [c if isinstance(c, tuple) else (c, c) for c in choices]
        field = forms.MultipleChoiceField(choices=pairs, **options)
    elif choices is not None:
        pairs = [c if isinstance(c, tuple) else (c, c) for c in choices]
        field = forms.ChoiceField(choices=pairs, **options)
    elif annotation is bool:
        field = forms.BooleanField(**options)
    elif annotation is int:
        field = forms.IntegerField(**options)
    elif annotation is float:
        field = forms.FloatField(**options)
    elif annotation is str:
        field = forms.CharField(**options)
    else:  # pragma: no cover - a list or dict field has its own widget
        raise TypeError(f"{path}: no form field for {typing.get_origin(annotation) or annotation!r}")
    setattr(field, PATH_ATTRIBUTE, path)
    return field


def _range_options(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A declared range (``low``/``high`` metadata: agent.budgets) as the field's bounds, refused in the config's own
    words (``must be ≥ 1, got 0``)."""
    options: dict[str, Any] = {}
    messages: dict[str, str] = {}
    if metadata.get("low") is not None:
        options["min_value"] = metadata["low"]
        messages["min_value"] = "must be ≥ %(limit_value)s, got %(show_value)s"
    if metadata.get("high") is not None:
        options["max_value"] = metadata["high"]
        messages["max_value"] = "must be ≤ %(limit_value)s, got %(show_value)s"
    if messages:
        options["error_messages"] = messages
    return options


def config_fields(
    paths: Iterable[str],
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    root: type[Any] | None = None,
) -> dict[str, forms.Field]:
    """``{name: field}`` of ``paths``, each named as its config field, ``overrides`` by path."""
    overrides = overrides or {}
    return {form_name(p): config_form_field(p, root=root, **dict(overrides.get(p, {}))) for p in paths}


def config_form_class(
    name: str,
    paths: Iterable[str],
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    root: type[Any] | None = None,
) -> type[forms.Form]:
    """A form class holding the fields of ``paths``, to inherit from (Django collects a base form's fields)."""
    return type(name, (forms.Form,), dict(config_fields(paths, overrides, root=root)))


def config_paths(fields: Mapping[str, forms.Field]) -> dict[str, str]:
    """``{form field name: config path}`` of a form's config-derived fields."""
    return {
        name: getattr(field, PATH_ATTRIBUTE)
        for name, field in fields.items()
        if getattr(field, PATH_ATTRIBUTE, None)
    }


def config_values(fields: Mapping[str, forms.Field], cleaned: Mapping[str, Any]) -> dict[str, Any]:
    """The nested config dict of the config-derived fields (an optional field left empty keeps the default)."""
    values: dict[str, Any] = {}
    for name, path in config_paths(fields).items():
        if cleaned.get(name) not in (None, ""):  # an optional field left empty keeps the config's default
            set_path(values, path, cleaned[name])
    return values


def error_field(
    fields: Mapping[str, forms.Field], config_path: str, extra: Mapping[str, str] = {}
) -> str | None:
    """The form field that shows a ConfigError's field: the derived one, else ``extra`` (exact or a prefix)."""
    for name, path in config_paths(fields).items():
        if path == config_path:
            return name
    for prefix, name in extra.items():
        if config_path == prefix or config_path.startswith(prefix + "."):
            return name
    return None
