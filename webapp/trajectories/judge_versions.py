"""Judge versions: what made a verdict — the judge's kind, model, prompt templates, verdict parser and sampling
settings — as one canonical JSON, hashed (sha256), with a readable name such as ``evidence@3f2a9c`` or
``gpt-4.1-mini·hiprag-prompt@81d0e4``.

Two verdicts of one model under two prompts (or two temperatures, or two parsers) have two versions, so an audit
measures each on its own and a changed prompt never inherits the old one's audit. The spec is built from what the
code and the run's stored judge settings say: the prompt templates are the ``scoring.judging`` module's own text,
the parser is the sha256 of its parsing functions' source, so editing either makes a new version.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Mapping
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webapp.trajectories.models import JudgeVersion

SPEC_VERSION = 1  # of the spec's layout; a new layout is a new version of every judge
LEGACY = "legacy"
IMPORTED = "imported"
HEURISTIC_KINDS = {"evidence-heuristic": "evidence", "reask-lexical": "reask-lexical"}


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def spec_sha256(spec: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(spec).encode("utf-8")).hexdigest()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _judging_module(method: str) -> ModuleType | None:
    import importlib

    try:
        return importlib.import_module(f"scoring.judging.{method}")
    except ImportError:
        return None


@cache
def prompt_templates(method: str) -> dict[str, str]:
    """The judge prompt templates of a method's ``scoring.judging`` module (its upper-case PROMPT/TEMPLATE text),
    by name; hashed individually so the spec stays short and a change of any one is a new version."""
    module = _judging_module(method)
    if module is None:
        return {}
    return {
        name: _sha(value)
        for name, value in sorted(vars(module).items())
        if name.isupper() and isinstance(value, str) and ("PROMPT" in name or "TEMPLATE" in name)
    }


@cache
def parser_digest(module_name: str) -> dict[str, str]:
    """The verdict parser: the sha256 of the source of the module's functions that parse or decide verdicts."""
    import importlib

    module = importlib.import_module(module_name)
    words = ("verdict", "parse", "flag", "finding", "equivalence", "says")
    parts = [
        inspect.getsource(value)
        for name, value in sorted(vars(module).items())
        if inspect.isfunction(value) and value.__module__ == module.__name__ and any(w in name for w in words)
    ]
    constants = {
        name: value
        for name, value in sorted(vars(module).items())
        if name.isupper() and isinstance(value, int | float | str | tuple) and not isinstance(value, bool)
        if "PROMPT" not in name and "TEMPLATE" not in name
    }
    return {"module": module_name, "sha256": _sha("\n".join(parts) + canonical_json(repr(constants)))}


def judge_spec(*, method: str, judge_model: str, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The spec of the judge that made a verdict of ``judge_model`` in a run of ``method`` whose stored judge
    settings are ``settings`` (Run.judge_settings: an evaluation's JudgeSpec, or a training run's
    ``{"judge": "evidence" | "policy" | {endpoint}}``). ``settings`` None: nothing is recorded (an import)."""
    if judge_model in HEURISTIC_KINDS:
        kind = HEURISTIC_KINDS[judge_model]
        module = "scoring.judging.evidence" if kind == "evidence" else "scoring.judging.reask"
        return {
            "v": SPEC_VERSION,
            "kind": kind,
            "model": judge_model,
            "prompts": {},
            "parser": parser_digest(module),
            "sampling": {},
        }
    if settings is None:
        return {"v": SPEC_VERSION, "kind": IMPORTED, "model": judge_model}
    judge = settings.get("judge")
    sampling: dict[str, Any] = {"temperature": float(settings.get("temperature", 0.0))}
    if isinstance(judge, Mapping):  # a training run's endpoint judge
        kind = "endpoint"
        sampling["temperature"] = float(judge.get("temperature", 0.0))
        if judge.get("max_tokens") is not None:
            sampling["max_tokens"] = judge.get("max_tokens")
    elif isinstance(judge, str):
        kind = judge
    else:
        kind = str(settings.get("kind") or "endpoint")
    if settings.get("max_tokens") is not None:
        sampling["max_tokens"] = settings.get("max_tokens")
    module = _judging_module(method)
    return {
        "v": SPEC_VERSION,
        "kind": kind,
        "model": judge_model,
        "method": method,
        "prompts": prompt_templates(method),
        "parser": parser_digest(module.__name__) if module is not None else {},
        "sampling": sampling,
    }


def legacy_spec(judge_model: str) -> dict[str, Any]:
    """Verdicts stored before judge versions, whose run recorded no judge settings."""
    return {"v": SPEC_VERSION, "kind": LEGACY, "model": judge_model}


def readable_name(spec: Mapping[str, Any], sha256: str) -> str:
    short = sha256[:6]
    kind, model = str(spec.get("kind", "")), str(spec.get("model", ""))
    if kind in ("evidence", "reask-lexical"):
        return f"{kind}@{short}"
    if kind in (LEGACY, IMPORTED):
        return f"{kind}·{model}@{short}"
    method = spec.get("method")
    return f"{model}·{method}-prompt@{short}" if method else f"{model}@{short}"


def judge_version_get_or_create(spec: Mapping[str, Any]) -> JudgeVersion:
    from webapp.trajectories.models import JudgeVersion

    sha = spec_sha256(spec)
    version, _ = JudgeVersion.objects.get_or_create(
        sha256=sha,
        defaults={
            "name": readable_name(spec, sha)[:200],
            "kind": str(spec.get("kind", ""))[:32],
            "model": str(spec.get("model", ""))[:300],
            "spec": dict(spec),
        },
    )
    return version


class VersionResolver:
    """The version of each (run, judge model) a batch of verdicts names, one lookup per distinct pair."""

    def __init__(self) -> None:
        self._settings: dict[int | None, tuple[str, dict[str, Any] | None]] = {}
        self._versions: dict[tuple[int | None, str], int] = {}

    def _run(self, run_id: int | None) -> tuple[str, dict[str, Any] | None]:
        if run_id not in self._settings:
            from webapp.runs.models import Run

            row = Run.objects.filter(pk=run_id).values_list("method", "judge_settings").first()
            if row is None:
                self._settings[run_id] = ("", None)
            else:
                method, settings = row
                self._settings[run_id] = (method, dict(settings) if settings else None)
        return self._settings[run_id]

    def version_id(self, run_id: int | None, judge_model: str) -> int:
        key = (run_id, judge_model)
        if key not in self._versions:
            method, settings = self._run(run_id)
            spec = judge_spec(method=method, judge_model=judge_model, settings=settings)
            self._versions[key] = judge_version_get_or_create(spec).pk
        return self._versions[key]


def run_primary_version_id(run_id: int) -> int | None:
    """The judge version a run's OSR/USR are read from: the version of its first stored over-/under-search verdict
    (the judge the run was made with). Later versions (a re-judge, a second judge's replies) are stored beside it
    and reported apart, never mixed into one rate. None: the run has no versioned verdict."""
    from webapp.trajectories.models import JudgeVerdict

    return (
        JudgeVerdict.objects.filter(
            trajectory__run_id=run_id, detector__in=("over_search", "under_search"), version__isnull=False
        )
        .order_by("pk")
        .values_list("version_id", flat=True)
        .first()
    )


def primary_verdicts_q(run_id: int, prefix: str = "") -> Any:
    """A Q keeping only the run's primary version's verdicts (``prefix`` = "verdicts__" through a relation)."""
    from django.db.models import Q

    primary = run_primary_version_id(run_id)
    return Q() if primary is None else Q(**{f"{prefix}version_id": primary})
