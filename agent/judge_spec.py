"""A judge's settings, typed (:class:`JudgeSpec`), the one table of judge kinds (:data:`KINDS`) and the one builder
of a rollout's judges (:func:`build_judges`).

Every place that names a judge derives from here: the evaluation and experiment specs store a ``JudgeSpec``
(``to_json``/``from_json``), the forms' choices are :func:`kind_choices`, the commands' ``--judge`` is parsed by
:func:`judge_from_option`, a training run's ``rollout.options.judge`` is :meth:`JudgeSpec.rollout_option`, and the
re-judge, the evaluation worker and the trainer's agent rollout build their judges with :func:`build_judges`.

One spelling per surface: the spec's fields (``kind``, ``base_url``, ``model``, ``api_key_env``, ...) in storage;
the same names prefixed ``judge_`` on forms (``judge`` for the kind: :func:`form_field`) and ``--judge-…`` on the
commands. A key is never stored: ``api_key_env`` names the environment variable that holds it.

Adding a judge kind: a row in :data:`KINDS` (what it is, where it is offered, whether it needs an endpoint) and its
branch in :func:`build_judges`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.cache import JudgeCache
    from agent.evaluate import Judges
    from agent.judge_client import ChatJudge, JudgeEndpoint
    from agent.judges import ReferencePlanStore


class JudgeKind(StrEnum):
    NONE = "none"
    POLICY = "policy"
    EVIDENCE = "evidence"
    REASK = "reask"
    OPENAI = "openai"


# Where a kind is offered: a training run's agent rollout, an evaluation, an experiment's stages, a re-judge.
TRAIN, EVALUATE, EXPERIMENT, REJUDGE = "train", "evaluate", "experiment", "rejudge"
# Whether a kind calls an endpoint (base_url + model): never, optionally, or always.
NO, OPTIONAL, REQUIRED = "no", "optional", "required"


@dataclass(frozen=True, slots=True)
class KindInfo:
    label: str  # the choice's text on a form
    help: str
    endpoint: str  # NO | OPTIONAL | REQUIRED
    llm: bool  # a language model answers (LLM-as-judge answer correctness is possible)
    uses: frozenset[str]


KINDS: dict[JudgeKind, KindInfo] = {
    JudgeKind.NONE: KindInfo(
        "none — no judge (OSR/USR stay undefined)",
        "No step judge: the method's process reward and OSR/USR have no verdicts.",
        NO,
        False,
        frozenset({TRAIN, EVALUATE, EXPERIMENT}),
    ),
    JudgeKind.POLICY: KindInfo(
        "policy judges itself (CPU demo only)",
        "The policy model answers the judge prompts (slow and close to random for a 135M model).",
        NO,
        True,
        frozenset({TRAIN, EVALUATE, EXPERIMENT}),
    ),
    JudgeKind.EVIDENCE: KindInfo(
        "evidence — heuristic, no LLM (HiPRAG's over-/under-search from the supporting passages)",
        "HiPRAG's detectors from the dataset's supporting passages and repeated queries (scoring.judging.evidence).",
        NO,
        False,
        frozenset({TRAIN, EVALUATE, EXPERIMENT, REJUDGE}),
    ),
    JudgeKind.REASK: KindInfo(
        "re-ask — HiPRAG's over-search test: the policy re-asked each query without retrieval, its answer "
        "matched with the step's conclusion (no LLM judge); under-search by the evidence rules",
        "HiPRAG's Sec. 3.2 over-search test (scoring.judging.reask); with an endpoint, the endpoint judges the "
        "equivalence by Fig. 5's prompt (and re-asks the query when regenerator = 'endpoint').",
        OPTIONAL,
        False,
        frozenset({TRAIN, EVALUATE}),
    ),
    JudgeKind.OPENAI: KindInfo(
        "an OpenAI-compatible endpoint",
        "A chat endpoint at base_url serving model (vLLM, OpenAI, ...), its key in the variable named api_key_env.",
        REQUIRED,
        True,
        frozenset({TRAIN, EVALUATE, EXPERIMENT, REJUDGE}),
    ),
}
ALIASES = {
    "endpoint": JudgeKind.OPENAI.value
}  # the training and experiment forms' older name of an endpoint judge
REGENERATORS = ("policy", "endpoint")  # who answers a re-asked query (reask with an endpoint)
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# (low, high) of the numeric settings; max_tokens may also be None (the endpoint's default).
RANGES: dict[str, tuple[float, float]] = {
    "timeout": (1.0, 600.0),
    "concurrency": (1, 1024),
    "temperature": (0.0, 2.0),
    "max_tokens": (1, 32768),
    "max_retries": (0, 10),
}
# The form field (and, with dashes, the command option) that shows each setting.
FORM_FIELDS = {"kind": "judge", "answer_judge": "answer_judge"}


def form_field(name: str) -> str:
    """The form field of a spec field: ``judge`` for the kind, ``judge_<name>`` for the rest."""
    return FORM_FIELDS.get(name, f"judge_{name}")


def kinds_for(use: str) -> tuple[str, ...]:
    return tuple(kind.value for kind, info in KINDS.items() if use in info.uses)


def kind_choices(use: str) -> list[tuple[str, str]]:
    """A form's ``(value, label)`` choices of the kinds offered for ``use``."""
    return [(kind.value, info.label) for kind, info in KINDS.items() if use in info.uses]


def endpoint_kinds(use: str) -> tuple[str, ...]:
    """The kinds offered for ``use`` that cannot run without an endpoint."""
    return tuple(k for k in kinds_for(use) if KINDS[JudgeKind(k)].endpoint == REQUIRED)


class JudgeSpecError(ValueError):
    """A judge setting that cannot be used; ``field`` is the spec's field name (see :func:`form_field`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class JudgeSpec:
    """A judge: its ``kind`` (a row of :data:`KINDS`) and, for an endpoint, where it lives and how it samples.
    ``answer_judge`` adds LLM-as-judge answer correctness; ``regenerator`` is who answers a re-asked query."""

    kind: str = JudgeKind.NONE.value
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    answer_judge: bool = False
    timeout: float = 60.0
    concurrency: int = 32
    temperature: float = 0.0
    max_tokens: int | None = None
    max_retries: int = 4
    regenerator: str = "policy"

    @property
    def info(self) -> KindInfo:
        return KINDS[JudgeKind(self.kind)]

    @property
    def has_endpoint(self) -> bool:
        return bool(self.base_url) and self.info.endpoint != NO

    @property
    def label(self) -> str:
        if self.kind == JudgeKind.EVIDENCE:
            return "evidence — heuristic (scoring.judging.evidence, no LLM)"
        if self.kind == JudgeKind.OPENAI:
            return f"{self.model} at {self.base_url}"
        return self.kind

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any] | None, *, default_kind: str = JudgeKind.NONE.value
    ) -> JudgeSpec:
        """A stored spec: an evaluation's ``judge``, an experiment's (once ``JudgeChoice``), a re-judge job's, or a
        form's values (``judge``, ``judge_base_url``, …). Unknown keys are ignored; the older names are read:
        ``judge_<field>`` and the kind ``endpoint``."""
        data = dict(data or {})
        known = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            name = "kind" if key == "judge" else key.removeprefix("judge_")
            if name in known and (key == name or name not in data):  # a spec name wins over its form name
                values[name] = value
        kind = str(values.get("kind") or default_kind)
        values["kind"] = ALIASES.get(kind, kind)
        return cls(**values)

    def endpoint(self) -> JudgeEndpoint:
        from agent.judge_client import JudgeEndpoint

        return JudgeEndpoint(
            base_url=self.base_url,
            model=self.model,
            api_key_env=self.api_key_env or None,
            timeout=self.timeout,
            max_retries=self.max_retries,
            concurrency=self.concurrency,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )

    def rollout_option(self) -> str | dict[str, Any] | None:
        """A training run's ``rollout.options.judge`` (trainer.agent_rollout): None, a kind's name, or the endpoint
        as a table (``reask`` names the regenerator when the re-ask test judges by an endpoint). Settings at their
        default are left out, so the option reads as it always has."""
        if self.kind == JudgeKind.NONE:
            return None
        if not self.has_endpoint:
            return self.kind
        option: dict[str, Any] = {"base_url": self.base_url, "model": self.model}
        if self.api_key_env:
            option["api_key_env"] = self.api_key_env
        defaults = JudgeSpec()
        for name in ("timeout", "concurrency", "temperature", "max_tokens", "max_retries"):
            if getattr(self, name) != getattr(defaults, name):
                option[name] = getattr(self, name)
        if self.kind == JudgeKind.REASK:
            option["reask"] = self.regenerator
        return option

    @classmethod
    def from_rollout_option(cls, option: Any) -> JudgeSpec:
        """The spec of a stored ``rollout.options.judge`` (the inverse of :meth:`rollout_option`)."""
        if option is None:
            return cls()
        if isinstance(option, str):
            return cls.from_json({"kind": option})
        values = dict(option)
        reask = values.pop("reask", None)
        kind = JudgeKind.REASK.value if reask else JudgeKind.OPENAI.value
        regenerator = "endpoint" if reask == "endpoint" else "policy"
        return cls.from_json({**values, "kind": kind, "regenerator": regenerator})


def judge_spec_check(spec: JudgeSpec, use: str) -> None:
    """Raise :class:`JudgeSpecError` for the first setting of ``spec`` that ``use`` cannot run with."""
    offered = kinds_for(use)
    if spec.kind not in offered:
        raise JudgeSpecError("kind", f"one of {', '.join(offered)}, got {spec.kind!r}")
    info = spec.info
    if info.endpoint == NO and (spec.base_url or spec.model):
        spec = dataclasses.replace(spec, base_url="", model="")  # a form's leftover endpoint fields: unused
    if info.endpoint == REQUIRED and not spec.base_url:
        raise JudgeSpecError("base_url", "an OpenAI-compatible judge needs its base URL")
    if spec.base_url and not spec.base_url.startswith(("http://", "https://")):
        raise JudgeSpecError("base_url", "an http:// or https:// URL")
    if spec.base_url and not spec.model.strip():
        raise JudgeSpecError("model", "name the model the judge endpoint serves")
    if spec.api_key_env and not ENV_NAME.match(spec.api_key_env):
        raise JudgeSpecError(
            "api_key_env", "the NAME of an environment variable (e.g. OPENAI_API_KEY), never the key itself"
        )
    if spec.answer_judge and not info.llm:
        raise JudgeSpecError("answer_judge", "LLM-as-judge correctness needs a judge")
    if spec.regenerator not in REGENERATORS:
        raise JudgeSpecError("regenerator", f"one of {', '.join(REGENERATORS)}")
    for name, (low, high) in RANGES.items():
        value = getattr(spec, name)
        if value is None and name == "max_tokens":
            continue
        whole = isinstance(low, int)
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
            raise JudgeSpecError(name, "expected a whole number" if whole else "expected a number")
        if not low <= value <= high:
            raise JudgeSpecError(name, f"expected a {'whole ' if whole else ''}number from {low} to {high}")


def rollout_option_check(option: Any) -> JudgeSpec:
    """A training run's ``rollout.options.judge`` as a spec, checked as a training run's judge; JudgeSpecError
    names the setting at fault."""
    if option is not None and not isinstance(option, str | Mapping):
        raise JudgeSpecError("kind", f"a judge kind or an endpoint's table, got {option!r}")
    spec = JudgeSpec.from_rollout_option(option)
    judge_spec_check(spec, TRAIN)
    return spec


def judge_from_option(
    value: str, *, use: str, model: str = "", api_key_env: str = "", base_url: str = ""
) -> JudgeSpec:
    """A command's ``--judge KIND`` (with ``--judge-base-url``) or ``--judge URL`` (an OpenAI-compatible endpoint's
    base URL, the short form); JudgeSpecError names ``kind`` when it is neither."""
    if value.startswith(("http://", "https://")):
        base_url, value = value, JudgeKind.OPENAI.value
    kind = ALIASES.get(value, value)
    if kind not in kinds_for(use):
        raise JudgeSpecError("kind", f"{', '.join(kinds_for(use))}, or an http(s):// base URL")
    return JudgeSpec(kind=kind, base_url=base_url, model=model, api_key_env=api_key_env)


def build_judges(
    spec: JudgeSpec,
    policy: Any,
    *,
    policy_endpoint: JudgeEndpoint | None = None,
    policy_max_new_tokens: int = 256,
    cache_for: Callable[[str], JudgeCache | None] | None = None,
    plans_for: Callable[[str], ReferencePlanStore] | None = None,
) -> Judges:
    """The judges of a rollout: ``policy`` is the in-process policy backend (it judges itself for ``policy``, and
    answers re-asked queries), ``policy_endpoint`` the policy's own endpoint when it is served (it judges through
    it); ``cache_for(model)`` gives a judge model's reply cache, ``plans_for(model)`` its reference-plan store."""
    from agent.evaluate import Judges
    from agent.judge_client import OpenAIJudge, TransformersJudge

    def plans(model: str) -> dict[str, Any]:
        return {"plans": plans_for(model)} if plans_for is not None else {}

    def cache(model: str) -> JudgeCache | None:
        return cache_for(model) if cache_for is not None else None

    kind = JudgeKind(spec.kind)
    if kind == JudgeKind.NONE:
        return Judges(**plans(""))
    if kind == JudgeKind.EVIDENCE:  # HiPRAG's heuristic detectors (scoring.judging.evidence): no LLM
        return Judges(evidence=True, **plans(""))
    if kind == JudgeKind.REASK:
        # HiPRAG's over-search test (Sec. 3.2): each query re-asked without retrieval, its answer matched with the
        # step's conclusion — lexically (scoring.judging.reask), or by the endpoint with Fig. 5's prompt.
        if not spec.has_endpoint:
            return Judges(evidence=True, reask=True, **plans(""))
        endpoint = OpenAIJudge(spec.endpoint(), cache=cache(spec.model))
        regenerator = endpoint if spec.regenerator == "endpoint" else None
        return Judges(judge=endpoint, evidence=True, reask=True, regenerator=regenerator, **plans(spec.model))
    judge: ChatJudge
    if kind == JudgeKind.OPENAI:
        judge = OpenAIJudge(spec.endpoint(), cache=cache(spec.model))
    elif policy_endpoint is not None:  # a served policy judges itself through its endpoint
        judge = OpenAIJudge(policy_endpoint, cache=cache(policy_endpoint.model))
    else:  # the in-process policy: TransformersJudge batches concurrent requests into chat() calls
        local = TransformersJudge(policy, max_new_tokens=policy_max_new_tokens)
        local.cache = cache(local.model)
        judge = local
    return Judges(judge=judge, answer_judge=judge if spec.answer_judge else None, **plans(judge.model))
