"""What an evaluation run is asked to do, as plain values: stored in ``Run.config`` and read back by the worker.

The form, the management command and the API all end in :func:`evaluation_spec_check`, so a configuration is
refused the same way wherever it comes from, with the name of the field at fault.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from agent.budgets import BudgetError, RolloutOverrides
from agent.judge_spec import EVALUATE, JudgeSpec, JudgeSpecError, form_field, judge_spec_check
from scoring.scorer import ScoringInputError, method_params
from webapp.runs.models import Method

# transformers and vllm run a local model folder in the worker (vllm: `make vllm`, docs/vllm.md); openai calls a server.
BACKEND_KINDS = ("transformers", "vllm", "openai")
# The rollout settings a run may override (the rest are each method's paper settings, agent.rollout.PAPER_CONFIGS).
ROLLOUT_OVERRIDES = tuple(f.name for f in fields(RolloutOverrides))
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class EvaluationConfigError(ValueError):
    """A configuration the run cannot start with; ``field`` names the form field (or option) at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class EvaluationSpec:
    method: str
    model: str  # a local model folder (transformers) or a served model name (openai)
    dataset_ids: tuple[int, ...]
    backend: str = "transformers"
    base_url: str = ""
    api_key_env: str = ""
    index_id: int | None = None
    retrieve_url: str = ""
    judge: JudgeSpec = field(default_factory=JudgeSpec)  # agent.judge_spec: its kinds are evaluations'
    params: dict[str, Any] = field(default_factory=dict)  # reward weights, declared in scoring.params
    # the budgets (ranges as agent.budgets declares them), temperature and seed; unset: the method's paper setting
    rollout: RolloutOverrides = field(default_factory=RolloutOverrides)
    limit: int | None = None  # questions per dataset (the first ones, in import order)
    batch_size: int = 32  # questions per evaluate() call: stored, reported and cancellable in between

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["dataset_ids"] = list(self.dataset_ids)
        data["rollout"] = self.rollout.to_json()  # only the settings given, as stored before
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EvaluationSpec:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["dataset_ids"] = tuple(values.get("dataset_ids", ()))
        values["judge"] = JudgeSpec.from_json(values.get("judge"))
        values["rollout"] = RolloutOverrides.from_json(values.get("rollout"))
        return cls(**values)


def _check_env_name(field_name: str, value: str) -> None:
    if value and not _ENV_NAME.match(value):
        raise EvaluationConfigError(
            field_name, "the NAME of an environment variable (e.g. OPENAI_API_KEY), never the key itself"
        )


def _check_url(field_name: str, value: str) -> None:
    if value and not value.startswith(("http://", "https://")):
        raise EvaluationConfigError(field_name, "an http:// or https:// URL")


def _check_reward_params(method: str, params: dict[str, Any]) -> None:
    """The method's weights against its declaration (scoring.params: ranges, choices, unknown keys)."""
    try:
        method_params(method, params)
    except ScoringInputError as exc:
        if exc.field.startswith("params"):
            raise EvaluationConfigError("params", exc.message if "." not in exc.field else str(exc)) from None


def evaluation_spec_check(spec: EvaluationSpec) -> None:
    """Raise :class:`EvaluationConfigError` for the first thing wrong with ``spec``."""
    if spec.method not in Method.values:
        raise EvaluationConfigError(
            "method", f"unknown method {spec.method!r}; known: {', '.join(Method.values)}"
        )
    if not spec.model:
        raise EvaluationConfigError("model", "give a local model folder or a served model name")
    if spec.backend not in BACKEND_KINDS:
        raise EvaluationConfigError("backend", f"one of {', '.join(BACKEND_KINDS)}")
    if spec.backend in ("transformers", "vllm") and not Path(spec.model).is_dir():
        raise EvaluationConfigError(
            "model",
            f"{spec.model!r} is not a model folder on this machine; give a base URL for a served model",
        )
    _check_url("base_url", spec.base_url)
    _check_env_name("api_key_env", spec.api_key_env)
    if not spec.dataset_ids:
        raise EvaluationConfigError("datasets", "choose at least one dataset")
    if (spec.index_id is None) == (not spec.retrieve_url):
        raise EvaluationConfigError("index", "choose an index or give a /retrieve URL (one of the two)")
    _check_url("retrieve_url", spec.retrieve_url)
    try:
        judge_spec_check(spec.judge, EVALUATE)
    except JudgeSpecError as exc:
        raise EvaluationConfigError(form_field(exc.field), exc.message) from None
    if not isinstance(spec.params, dict):
        raise EvaluationConfigError("params", "a JSON object of reward parameters")
    _check_reward_params(spec.method, spec.params)
    try:
        spec.rollout.check()  # each budget within its range as agent.budgets declares it
    except BudgetError as exc:
        raise EvaluationConfigError(exc.field, exc.message) from None
    if spec.limit is not None and spec.limit < 1:
        raise EvaluationConfigError("limit", "at least 1 question per dataset (or no limit)")
    if spec.batch_size < 1:
        raise EvaluationConfigError("batch_size", "at least 1")
