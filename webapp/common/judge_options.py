"""A judge on forms and commands, derived from ``agent.judge_spec``: the kind's choices come from its table of kinds,
the endpoint's fields are the spec's own prefixed ``judge_`` (``judge_base_url``, ``judge_model``,
``judge_api_key_env``; ``--judge-base-url``, ... on the commands, where ``--judge URL`` is the short form of
``--judge openai --judge-base-url URL``). A key is never stored: the option names the environment variable that
holds it."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from django import forms

from agent.judge_spec import (
    ALIASES,
    ENV_NAME,
    JudgeSpec,
    JudgeSpecError,
    endpoint_kinds,
    form_field,
    judge_from_option,
    kind_choices,
    kinds_for,
)

ENDPOINT_FIELDS = tuple(form_field(name) for name in ("base_url", "model", "api_key_env"))


class JudgeKindField(forms.ChoiceField):
    """A judge kind; an older form's ``endpoint`` reads as ``openai`` (agent.judge_spec.ALIASES)."""

    def to_python(self, value: Any) -> str:
        text = super().to_python(value)
        return ALIASES.get(text, text)


def judge_field(use: str, *, initial: str, help_text: str = "") -> forms.ChoiceField:
    """The form's ``judge`` choice: the kinds ``agent.judge_spec.KINDS`` offers for ``use``."""
    return JudgeKindField(choices=kind_choices(use), initial=initial, help_text=help_text)


class JudgeEndpointFields(forms.Form):
    """A form's endpoint-judge fields (inherit beside the form's own ``judge`` choice)."""

    judge_base_url = forms.URLField(required=False, label="judge base URL", assume_scheme="https")
    judge_model = forms.CharField(required=False, max_length=300, label="judge model")
    judge_api_key_env = forms.CharField(
        required=False,
        max_length=100,
        label="judge API key variable",
        help_text="The NAME of the environment variable holding the key on the worker — never the key.",
    )

    def clean_judge_api_key_env(self) -> str:
        value: str = (self.cleaned_data.get("judge_api_key_env") or "").strip()
        if value and not ENV_NAME.match(value):
            raise forms.ValidationError(
                "Give the NAME of an environment variable (e.g. JUDGE_API_KEY), not the key itself."
            )
        return value

    def require_endpoint(self, cleaned: dict[str, Any], use: str) -> None:
        """A judge that needs an endpoint needs its URL and model."""
        if cleaned.get("judge") in endpoint_kinds(use):
            for name in (form_field("base_url"), form_field("model")):
                if not cleaned.get(name) and name not in self.errors:
                    self.add_error(name, "Required for an endpoint judge.")

    def judge_spec(self, **extra: Any) -> JudgeSpec:
        return judge_spec_from_form(self.cleaned_data, **extra)


def judge_spec_from_form(cleaned: Mapping[str, Any], **extra: Any) -> JudgeSpec:
    """The spec of a form's (or a command's options') judge fields: ``judge`` and ``judge_<field>``."""
    values = {"kind": cleaned.get("judge") or "none", **extra}
    for name in ("base_url", "model", "api_key_env"):
        values[name] = str(cleaned.get(form_field(name)) or "").strip()
    return JudgeSpec.from_json(values)


def add_judge_arguments(parser: argparse.ArgumentParser, *, default: str, use: str) -> None:
    """``--judge KIND|URL``, ``--judge-base-url``, ``--judge-model``, ``--judge-api-key-env`` (``--judge-key-env``:
    its older name)."""
    parser.add_argument(
        "--judge", default=default, help=f"{', '.join(kinds_for(use))}, or an OpenAI-compatible base URL"
    )
    parser.add_argument(
        "--judge-base-url", default="", help="the judge endpoint's base URL (with --judge openai)"
    )
    parser.add_argument("--judge-model", default="", help="model name at the judge URL")
    parser.add_argument(
        "--judge-api-key-env",
        "--judge-key-env",
        dest="judge_api_key_env",
        default="",
        help="NAME of the variable holding the judge's key",
    )


def judge_from_options(options: Mapping[str, Any], *, use: str) -> JudgeSpec:
    """A command's judge options as a spec; JudgeSpecError names ``kind`` for a --judge it does not know."""
    return judge_from_option(
        str(options["judge"]),
        use=use,
        base_url=str(options.get("judge_base_url") or ""),
        model=str(options.get("judge_model") or ""),
        api_key_env=str(options.get("judge_api_key_env") or ""),
    )


__all__ = [
    "ENDPOINT_FIELDS",
    "JudgeEndpointFields",
    "JudgeSpecError",
    "add_judge_arguments",
    "judge_field",
    "judge_from_options",
    "judge_spec_from_form",
]
