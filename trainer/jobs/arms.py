"""An experiment's arm and how one is written on a command line or a form, declared once for every experiment.

The web app's experiments (``webapp.experiments.specs``: the form, ``manage.py experiment --arm``, stored specs)
and the stage runner (``python -m trainer.jobs experiment --arm``) read arms with :func:`parse_arm`; each turns
:class:`ArmError` into its own error type, naming its own field or flag.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class ArmError(ValueError):
    """An arm that cannot be read: the text given and what is wrong with it."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Arm:
    """One arm of an experiment: a name, the reward method it trains with and that method's weights (as
    scoring.scorer.score takes them). Arms of one method differ only in their weights: HiPRAG's Table 2 compares
    λp = 0 (outcome and format only) with λp = 0.4 in one format, prompt, parser and judge."""

    name: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        weights = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.name} = {self.method}" + (f" ({weights})" if weights else "")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "method": self.method, "params": dict(self.params)}


def parse_arm(text: str, *, check: bool = False) -> Arm:
    """``name=method:key=value,key=value`` (``outcome=hiprag:lambda_p=0``), ``name=method`` or a bare ``method``
    (an arm named after it). Values are JSON where they parse (numbers, true/false), else strings. With ``check``
    the method must be one of ``scoring.scorer.METHODS`` and the weights the method's own (``method_params``);
    otherwise the spec's own check does that later, naming its field."""
    head = text.split(":", 1)[0]
    name, _, rest = text.strip().partition("=") if "=" in head else ("", "", text.strip())
    method, _, weights = rest.partition(":")
    method = method.strip()
    if not method:
        raise ArmError(f"{text!r}: expected NAME=METHOD[:KEY=VALUE,...]")
    params: dict[str, Any] = {}
    for item in filter(None, (w.strip() for w in weights.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ArmError(f"{text!r}: a weight is key=value, got {item!r}")
        try:
            params[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[key.strip()] = value.strip()
    arm = Arm(name=name.strip() or method, method=method, params=params)
    if check:
        check_arm(arm, text)
    return arm


def check_arm(arm: Arm, text: str = "") -> None:
    """The arm's method is known and its weights are the method's, in range (``scoring.params``)."""
    from scoring.errors import ScoringInputError
    from scoring.scorer import METHODS, method_params

    shown = repr(text) if text else arm.name
    if arm.method not in METHODS:
        raise ArmError(f"{shown}: method {arm.method!r} is not one of {', '.join(METHODS)}")
    try:
        method_params(arm.method, arm.params)
    except ScoringInputError as exc:
        raise ArmError(f"{shown}: {exc}") from None
