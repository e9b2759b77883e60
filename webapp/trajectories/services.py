"""Writes on trajectories: parsing agent responses into steps, bulk insertion, the JSONL trajectory import."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from django.db import models, transaction

from scoring import formats
from scoring.metrics import cover_exact_match, exact_match, token_f1
from scoring.rewards.result import Reward
from scoring.scorer import ScoringInputError, score
from scoring.trajectory import Trajectory as ParsedTrajectory
from scoring.verdicts import MissingVerdict
from webapp.common.importing import DataImportError, RecordReader, batched, iter_jsonl
from webapp.datasets.models import Dataset, Question
from webapp.runs.models import Run
from webapp.trajectories.chat import chat_line_parsed, chat_line_scored, is_chat_line
from webapp.trajectories.judge_versions import VersionResolver
from webapp.trajectories.models import JudgeVerdict, Step, Trajectory


@dataclass(frozen=True, slots=True)
class VerdictInput:
    """One judge outcome to store. ``step_index`` None = about the whole trajectory. ``outcome`` is "true",
    "false" or "error" (an unparseable reply is stored as "error" with its raw reply: it is not a "no")."""

    detector: str
    outcome: str
    judge_model: str
    step_index: int | None = None
    score: float | None = None
    raw_reply: str = ""
    latency_ms: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    version_id: int | None = None  # the JudgeVersion; None: resolved from the run's judge settings and model


@dataclass(frozen=True, slots=True)
class TrajectoryInput:
    """One trajectory to store: the parsed response and where it belongs."""

    parsed: ParsedTrajectory
    golden_answers: Sequence[str] = ()
    question_text: str = ""
    question_id: int | None = None
    dataset_id: int | None = None
    run_id: int | None = None
    training_step: int | None = None
    total_reward: float | None = None
    reward_components: dict[str, float] = field(default_factory=dict)
    step_rewards: Sequence[float] | None = None
    verdicts: Sequence[VerdictInput] = ()
    regenerated_answers: dict[int, str] = field(default_factory=dict)  # step index → HiPRAG re-answer
    intermediate_answers: dict[int, str] = field(default_factory=dict)  # step index → AutoSearch self-answer
    end_reason: str = ""  # agent.rollout: answer, eos, budget:turns, budget:turn_tokens, …
    cut_turns: int = 0


def _correctness(answer: str | None, golds: Sequence[str]) -> tuple[bool | None, bool | None, float | None]:
    if not golds:
        return None, None, None
    if answer is None:
        return False, False, 0.0
    return exact_match(answer, golds), cover_exact_match(answer, golds), token_f1(answer, golds).f1


def _trajectory_row(item: TrajectoryInput) -> Trajectory:
    parsed = item.parsed
    em, cem, f1 = _correctness(parsed.answer, item.golden_answers)
    return Trajectory(
        run_id=item.run_id,
        question_id=item.question_id,
        dataset_id=item.dataset_id,
        question_text=item.question_text,
        golden_answers=list(item.golden_answers),
        training_step=item.training_step,
        format=parsed.format,
        raw_text=parsed.text,
        format_ok=parsed.valid,
        format_error=parsed.error.reason[:500] if parsed.error else "",
        format_error_position=parsed.error.position if parsed.error else None,
        end_reason=item.end_reason[:32],
        cut_turns=item.cut_turns,
        final_answer=parsed.answer,
        answers=list(parsed.answers),
        exact_match=em,
        cover_exact_match=cem,
        f1=f1,
        n_steps=len(parsed.steps),
        n_searches=parsed.n_searches,
        total_reward=item.total_reward,
        reward_components=dict(item.reward_components),
    )


def _step_rows(trajectory_id: int, item: TrajectoryInput) -> Iterator[Step]:
    rewards = item.step_rewards or ()
    for position, step in enumerate(item.parsed.steps):
        search = step.is_search
        yield Step(
            trajectory_id=trajectory_id,
            run_id=item.run_id,
            index=step.index,
            kind=Step.Kind.SEARCH if search else Step.Kind.NON_SEARCH,
            reasoning=step.reasoning,
            # A search step always has a query, even an empty one (the checked constraint step_search_has_query).
            query=step.query if step.query is not None or not search else "",
            context=step.context,
            conclusion=step.conclusion,
            reward=rewards[position] if position < len(rewards) else None,
            regenerated_answer=item.regenerated_answers.get(step.index),
            intermediate_answer=item.intermediate_answers.get(step.index),
        )


def _verdict_rows(
    trajectory_id: int, step_ids: dict[int, int], item: TrajectoryInput, versions: VersionResolver
) -> Iterator[JudgeVerdict]:
    for verdict in item.verdicts:
        step_id = None
        if verdict.step_index is not None:
            step_id = step_ids.get(verdict.step_index)
            if step_id is None:
                raise ValueError(
                    f"a {verdict.detector} verdict names step {verdict.step_index}, which is not stored"
                )
        yield JudgeVerdict(
            trajectory_id=trajectory_id,
            step_id=step_id,
            detector=verdict.detector,
            outcome=verdict.outcome,
            score=verdict.score,
            raw_reply=verdict.raw_reply,
            judge_model=verdict.judge_model,
            version_id=verdict.version_id or versions.version_id(item.run_id, verdict.judge_model),
            latency_ms=verdict.latency_ms,
            prompt_tokens=verdict.prompt_tokens,
            completion_tokens=verdict.completion_tokens,
        )


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


_M = TypeVar("_M", bound=models.Model)


def _without_nul(row: _M) -> _M:
    """NUL characters replaced by U+FFFD (one character for one, so stored error positions still point right):
    a model can generate them (a random or broken policy does), and PostgreSQL text and JSON refuse them."""
    for model_field in row._meta.concrete_fields:
        value = getattr(row, model_field.attname)
        if isinstance(value, str | list | dict):
            setattr(row, model_field.attname, _clean(value))
    return row


def trajectory_bulk_create(*, items: Iterable[TrajectoryInput], batch_size: int | None = None) -> int:
    """Insert trajectories and their steps in batches; returns the number of trajectories. Call inside a transaction.

    ``bulk_create`` returns primary keys on PostgreSQL and on SQLite >= 3.35, which the steps need.
    """
    count = 0
    versions = VersionResolver()
    for batch in batched(items, batch_size):
        created = Trajectory.objects.bulk_create([_without_nul(_trajectory_row(item)) for item in batch])
        steps = [
            _without_nul(step)
            for row, item in zip(created, batch, strict=True)
            for step in _step_rows(row.pk, item)
        ]
        Step.objects.bulk_create(steps, batch_size=5000)
        if any(item.verdicts for item in batch):
            step_ids: dict[int, dict[int, int]] = {}
            for step in steps:
                step_ids.setdefault(step.trajectory_id, {})[step.index] = step.pk
            verdicts = [
                verdict
                for row, item in zip(created, batch, strict=True)
                for verdict in _verdict_rows(row.pk, step_ids.get(row.pk, {}), item, versions)
            ]
            JudgeVerdict.objects.bulk_create(verdicts, batch_size=5000)
        count += len(created)
    return count


class _Resolver:
    """Looks up runs, datasets and questions named by import lines, one query per distinct name."""

    def __init__(self, *, file: str, default_run_id: int | None, default_dataset: str | None) -> None:
        self.file = file
        self.default_run_id = default_run_id
        self.default_dataset = default_dataset
        self.runs: dict[Any, int] = {}
        self.datasets: dict[str, Dataset] = {}
        self.questions: dict[int, dict[str, Question]] = {}

    def run_id(self, reader: RecordReader) -> int | None:
        ref = reader.record.get("run")
        if ref is None:
            return self.default_run_id
        if ref not in self.runs:
            runs = Run.objects.filter(pk=ref) if isinstance(ref, int) else Run.objects.filter(name=str(ref))
            found = list(runs.values_list("pk", flat=True)[:2])
            if len(found) != 1:
                raise reader.error(
                    "run", f"no run {ref!r}" if not found else f"several runs are named {ref!r}"
                )
            self.runs[ref] = found[0]
        return self.runs[ref]

    def dataset(self, reader: RecordReader) -> Dataset | None:
        name = reader.text("dataset", required=False) or self.default_dataset
        if name is None:
            return None
        if name not in self.datasets:
            try:
                self.datasets[name] = Dataset.objects.get(name=name)
            except Dataset.DoesNotExist:
                raise reader.error("dataset", f"no dataset named {name!r}") from None
        return self.datasets[name]

    def question(self, reader: RecordReader, dataset: Dataset | None) -> Question:
        external_id = reader.text("question_id")
        assert external_id is not None
        if dataset is None:
            matches = list(Question.objects.filter(external_id=external_id).select_related("dataset")[:2])
            if len(matches) != 1:
                problem = "not found in any dataset" if not matches else "found in several datasets; name one"
                raise reader.error("question_id", f"{external_id!r} {problem}")
            return matches[0]
        if dataset.pk not in self.questions:
            self.questions[dataset.pk] = {
                q.external_id: q
                for q in Question.objects.filter(dataset=dataset).only(
                    "id", "external_id", "text", "golden_answers"
                )
            }
        try:
            return self.questions[dataset.pk][external_id]
        except KeyError:
            raise reader.error("question_id", f"{external_id!r} is not in dataset {dataset.name!r}") from None


# No reward is this large: beyond it a value is a bug, and inf or NaN would break the exports.
MAX_REWARD_MAGNITUDE = 1e12


def _float_or_error(reader: RecordReader, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise reader.error(name, "expected a number")
    # exact int/float comparison: 10**400 is refused before float() overflows; inf (1e999 in JSON) and NaN too
    if not -MAX_REWARD_MAGNITUDE <= value <= MAX_REWARD_MAGNITUDE:
        shown = "a non-finite number" if isinstance(value, float) else "a number"
        raise reader.error(name, f"expected a finite number within ±{MAX_REWARD_MAGNITUDE:g}, got {shown}")
    return float(value)


_DETECTORS = frozenset(JudgeVerdict.Detector.values)
_OUTCOMES = frozenset(JudgeVerdict.Outcome.values)


def _verdicts(reader: RecordReader, parsed: ParsedTrajectory) -> list[VerdictInput]:
    """``"verdicts": [{"detector", "outcome", "step"?, "judge_model"?, "score"?, "raw_reply"?}]`` of an import line."""
    raw = reader.record.get("verdicts", [])
    if not isinstance(raw, list):
        raise reader.error("verdicts", "expected a list of objects")
    found = []
    for i, item in enumerate(raw):
        where = f"verdicts[{i}]"
        if not isinstance(item, dict):
            raise reader.error(where, "expected an object")
        detector, outcome, step = item.get("detector"), item.get("outcome"), item.get("step")
        if detector not in _DETECTORS:
            raise reader.error(f"{where}.detector", f"expected one of {', '.join(sorted(_DETECTORS))}")
        if outcome not in _OUTCOMES:
            raise reader.error(f"{where}.outcome", f"expected one of {', '.join(sorted(_OUTCOMES))}")
        if step is not None and (
            isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(parsed.steps)
        ):
            raise reader.error(f"{where}.step", f"expected a step index below {len(parsed.steps)}")
        score = item.get("score")
        found.append(
            VerdictInput(
                detector=detector,
                outcome=outcome,
                judge_model=str(item.get("judge_model", "imported")),
                step_index=step,
                score=None if score is None else _float_or_error(reader, f"{where}.score", score),
                raw_reply=str(item.get("raw_reply", "")),
            )
        )
    return found


def _hiprag_step_flags(parsed: ParsedTrajectory, verdicts: Sequence[VerdictInput]) -> list[str]:
    """HiPRAG's per-step detector outcomes (over-search on search steps, under-search on the others), as the
    scorer takes them, read off the imported verdicts, up to the first step without one."""
    by_step = {
        v.step_index: v.outcome
        for v in verdicts
        if v.step_index is not None and v.detector in ("over_search", "under_search")
    }
    flags = []
    for step in parsed.steps:
        if step.index not in by_step:
            break
        flags.append(by_step[step.index])
    return flags


def _scored(
    reader: RecordReader, parsed: ParsedTrajectory, golds: Sequence[str], verdicts: Sequence[VerdictInput]
) -> Reward:
    """The paper-mode reward of ``"method"`` for this line, from its ``"judgements"`` (or, for HiPRAG, its verdicts)."""
    method = reader.text("method")
    assert method is not None
    judgements = dict(reader.mapping("judgements"))
    if method == "hiprag" and "step_flags" not in judgements:
        judgements["step_flags"] = _hiprag_step_flags(parsed, verdicts)
    if is_chat_line(reader):
        return chat_line_scored(reader, method, parsed, golds, judgements)
    try:
        return score(
            method, parsed.text, list(golds), params=reader.mapping("params"), judgements=judgements
        ).reward
    except ScoringInputError as exc:
        raise reader.error(exc.field, exc.message) from None
    except MissingVerdict as exc:
        raise reader.error("verdicts", f"the {method} reward needs a judge outcome: {exc}") from None


def _trajectory_inputs(path: Path, resolver: _Resolver) -> Iterator[TrajectoryInput]:
    for number, record in iter_jsonl(path, name=resolver.file):
        reader = RecordReader(record, file=resolver.file, line=number)
        if is_chat_line(reader):  # OpenAI-style messages with tool calls (webapp.trajectories.chat)
            parsed = chat_line_parsed(reader)
        else:
            response = reader.text("response", allow_empty=True)
            format_name = reader.text("format")
            assert response is not None and format_name is not None
            if format_name not in formats.PARSERS:
                raise reader.error(
                    "format", f"unknown format {format_name!r}; known: {', '.join(formats.PARSERS)}"
                )
            parsed = formats.parse(format_name, response)
        golds_field = (
            "golds" if reader.has("golds") and not reader.has("golden_answers") else "golden_answers"
        )
        dataset = resolver.dataset(reader)
        if reader.has("question_id"):
            question = resolver.question(reader, dataset)
            question_pk, dataset_id = question.pk, question.dataset_id
            question_text, golds = question.text, list(question.golden_answers)
        elif reader.has("question"):
            question_pk, dataset_id = None, dataset.pk if dataset else None
            question_text = reader.text("question") or ""
            golds = reader.text_list(golds_field)
        elif is_chat_line(reader) and parsed.extras.get("question"):  # the first user message
            question_pk, dataset_id = None, dataset.pk if dataset else None
            question_text = parsed.extras["question"]
            golds = reader.text_list(golds_field)
        else:
            raise reader.error("question_id", "missing (give question_id, or question and golden_answers)")
        step_rewards = record.get("step_rewards")
        if step_rewards is not None and not isinstance(step_rewards, list):
            raise reader.error("step_rewards", "expected a list of numbers")
        components = {
            k: _float_or_error(reader, f"reward_components.{k}", v)
            for k, v in reader.mapping("reward_components").items()
        }
        rewards = [_float_or_error(reader, "step_rewards", v) for v in step_rewards] if step_rewards else None
        total = _float_or_error(reader, "reward", record["reward"]) if reader.has("reward") else None
        verdicts = _verdicts(reader, parsed)
        if reader.has("method") and total is None:
            scored = _scored(reader, parsed, golds, verdicts)
            total, components, rewards = (
                scored.total,
                dict(scored.components),
                list(scored.step_rewards) or None,
            )
        yield TrajectoryInput(
            parsed=parsed,
            verdicts=verdicts,
            golden_answers=golds,
            question_text=question_text,
            question_id=question_pk,
            dataset_id=dataset_id,
            run_id=resolver.run_id(reader),
            training_step=reader.integer("step", required=False),
            total_reward=total,
            reward_components=components,
            step_rewards=rewards,
        )


@transaction.atomic
def trajectory_import(
    *,
    path: str | Path,
    run_id: int | None = None,
    dataset_name: str | None = None,
    display_name: str | None = None,
) -> int:
    """Import a JSONL file of agent responses, parsed by ``scoring.formats`` into steps. All or nothing.

    Each line: ``{"question_id"`` (or ``"question"`` + ``"golden_answers"``), ``"response"``, ``"format"``, and
    optionally ``"run"`` (id or name), ``"dataset"`` (name), ``"step"``, ``"reward"``, ``"reward_components"``,
    ``"step_rewards"``, ``"verdicts"`` (judge outcomes to store) and ``"method"`` (+ ``"params"``, ``"judgements"``):
    a line with a method and no reward is scored by ``scoring.scorer.score`` (HiPRAG's step flags are read off its
    over-/under-search verdicts). ``run_id`` and ``dataset_name`` are the defaults for lines that name none.
    A line with ``"messages"`` instead of ``"response"`` is a chat trajectory (OpenAI-style tool calls; golds as
    ``"golds"`` or ``"golden_answers"``; the question defaults to the first user message): see
    :mod:`webapp.trajectories.chat`.
    """
    path = Path(path)
    label = display_name or str(path)
    if run_id is not None and not Run.objects.filter(pk=run_id).exists():
        raise DataImportError(file=label, line=None, field="run", message=f"no run {run_id}")
    resolver = _Resolver(file=label, default_run_id=run_id, default_dataset=dataset_name)
    return trajectory_bulk_create(items=_trajectory_inputs(path, resolver))


def trajectory_import_upload(
    *, upload: Any, run_id: int | None = None, dataset_name: str | None = None
) -> int:
    """:func:`trajectory_import` of an uploaded JSONL file (the API's ``POST /api/v1/trajectories/import/``), read
    from a temporary copy; all or nothing, errors name the upload's file name, line and field."""
    import tempfile

    name = str(getattr(upload, "name", "") or "upload.jsonl")
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as handle:
        for chunk in upload.chunks():
            handle.write(chunk)
        handle.flush()
        return trajectory_import(
            path=handle.name, run_id=run_id, dataset_name=dataset_name, display_name=name
        )
