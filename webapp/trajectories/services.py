"""Writes on trajectories: the JSONL trajectory import (its lines parsed into steps, checked and scored), stored in
bulk by :mod:`webapp.trajectories.bulk` (whose names are importable from here too)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from django.db import transaction

from scoring import formats
from scoring.rewards.result import Reward
from scoring.scorer import ScoringInputError, score
from scoring.trajectory import Trajectory as ParsedTrajectory
from scoring.verdicts import MissingVerdict
from webapp.common.importing import DataImportError, RecordReader, iter_jsonl
from webapp.datasets.models import Dataset, Question
from webapp.runs.models import Run
from webapp.trajectories.bulk import TrajectoryInput, VerdictInput, trajectory_bulk_create
from webapp.trajectories.chat import chat_line_parsed, chat_line_scored, is_chat_line
from webapp.trajectories.models import JudgeVerdict

__all__ = [
    "TrajectoryInput",
    "VerdictInput",
    "trajectory_bulk_create",
    "trajectory_import",
    "trajectory_import_upload",
]


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
