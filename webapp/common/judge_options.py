"""The judge endpoint's options, spelled one way everywhere: ``judge_base_url``, ``judge_model`` and
``judge_api_key_env`` on forms (``--judge URL``, ``--judge-model``, ``--judge-api-key-env`` on the commands), as
the stored ``JudgeSpec``/``JudgeChoice``/``rollout.options.judge`` call them ``base_url``, ``model``, ``api_key_env``.
A key is never stored: the option names the environment variable that holds it."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from typing import Any

from django import forms

ENV_VAR_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
ENDPOINT_FIELDS = ("judge_base_url", "judge_model", "judge_api_key_env")


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
        if value and not ENV_VAR_NAME.match(value):
            raise forms.ValidationError(
                "Give the NAME of an environment variable (e.g. JUDGE_API_KEY), not the key itself."
            )
        return value

    def require_endpoint(
        self, cleaned: dict[str, Any], endpoint_kinds: Iterable[str] = ("endpoint",)
    ) -> None:
        """An endpoint judge needs its URL and model."""
        if cleaned.get("judge") in endpoint_kinds:
            for name in ("judge_base_url", "judge_model"):
                if not cleaned.get(name) and name not in self.errors:
                    self.add_error(name, "Required for an endpoint judge.")


def add_judge_arguments(parser: argparse.ArgumentParser, *, default: str, kinds: str) -> None:
    """``--judge KIND|URL``, ``--judge-model``, ``--judge-api-key-env`` (``--judge-key-env``: its older name)."""
    parser.add_argument("--judge", default=default, help=f"{kinds}, or an OpenAI-compatible base URL")
    parser.add_argument("--judge-model", default="", help="model name at the judge URL")
    parser.add_argument(
        "--judge-api-key-env",
        "--judge-key-env",
        dest="judge_api_key_env",
        default="",
        help="NAME of the variable holding the judge's key",
    )
