"""The questions a training run trains and validates on: a FlashRAG JSONL file's rows (or the built-in demo
questions) as dataset rows with the config's prompt template, the held-out validation questions left out.

Standard library only at import: :mod:`trainer.train` imports this module before ``main()`` listens for a stop, and
:mod:`trainer.config` is imported only where an error is raised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.config import RunConfig

DEMO_QUESTIONS = [
    ("demo-1", "What is the capital of France?", ["Paris"]),
    ("demo-2", "Which city is the French capital?", ["Paris"]),
    ("demo-3", "Where is the Louvre?", ["Paris"]),
    ("demo-4", "Which city hosts the Eiffel Tower?", ["Paris"]),
    ("demo-5", "Where did the 1900 Summer Olympics take place?", ["Paris"]),
    ("demo-6", "What is the largest city of France?", ["Paris"]),
    ("demo-7", "Which city is on the Seine and is France's capital?", ["Paris"]),
    ("demo-8", "Where is the Arc de Triomphe?", ["Paris"]),
]


def read_question_rows(path: str | Path) -> list[dict[str, Any]]:
    """A FlashRAG JSONL file's question rows ({"id", "question", "golden_answers", "metadata"}), each with an ``id``
    (its line number when it has none); a missing file or a bad line is a ConfigError on ``data.path`` naming both."""
    from trainer.config import ConfigError

    path = Path(path)
    if not path.is_file():
        raise ConfigError("data.path", f"{path} does not exist")
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise TypeError("not a JSON object")
                missing = [key for key in ("question", "golden_answers") if key not in row]
                if missing:
                    raise KeyError(missing[0])
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ConfigError(
                    "data.path", f"{path}:{number}: not a FlashRAG question row ({exc})"
                ) from None
            row.setdefault("id", str(number))
            rows.append(row)
    return rows


def _question_rows(path: str) -> list[dict[str, Any]]:
    """The questions of a FlashRAG JSONL file (empty path: the built-in demo questions), before any template."""
    if not path:
        return [{"id": i, "question": q, "golden_answers": g} for i, q, g in DEMO_QUESTIONS]
    raw: list[dict[str, Any]] = []
    for item in read_question_rows(path):
        golds = item["golden_answers"]
        found = item.get("metadata")
        metadata: dict[str, Any] = found if isinstance(found, dict) else {}
        raw.append(
            {
                "id": str(item["id"]),
                "question": item["question"],
                "golden_answers": [golds] if isinstance(golds, str) else list(golds),
                "dataset": str(metadata.get("data_source") or item.get("data_source") or Path(path).stem),
                "supporting_titles": [str(t) for t in metadata.get("supporting_titles") or ()],
            }
        )
    return raw


def _held_out(config: RunConfig) -> int:
    """How many questions at the end of the training data are validation's (validation on, without its own file)."""
    v = config.validation
    return v.questions if v.every_steps and not v.path else 0


def _as_rows(config: RunConfig, raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "prompt": config.data.prompt_template.format(question=r["question"]),
            "question": r["question"],
            "golden_answers": r["golden_answers"],
            "id": str(r["id"]),
            "dataset": r.get("dataset", "demo"),
            "supporting_titles": r.get("supporting_titles", []),
        }
        for r in raw
    ]


def load_rows(config: RunConfig) -> list[dict[str, Any]]:
    """Dataset rows: ``prompt`` (from the template), ``question``, ``golden_answers``, ``id``, ``dataset``. With
    validation on and no ``validation.path``, the last ``validation.questions`` questions are left out (held out)."""
    from trainer.config import ConfigError

    raw = _question_rows(config.data.path)
    held_out = _held_out(config)
    if held_out:
        if held_out >= len(raw):
            raise ConfigError(
                "validation.questions",
                f"holds out {held_out} of the training data's {len(raw)} questions, leaving none to train on: "
                "lower it or set validation.path",
            )
        raw = raw[:-held_out]
    if config.data.limit:
        raw = raw[: config.data.limit]
    if not raw:
        raise ConfigError("data.path", "holds no questions")
    return _as_rows(config, raw)


def load_validation_rows(config: RunConfig) -> list[dict[str, Any]]:
    """The held-out questions: the first ``validation.questions`` of ``validation.path``, or the last ones of the
    training data (:func:`load_rows` leaves those out). Empty when validation is off."""
    from trainer.config import ConfigError

    v = config.validation
    if not v.every_steps:
        return []
    if v.path:
        try:
            raw = _question_rows(v.path)[: v.questions]
        except ConfigError as exc:  # read_question_rows names data.path; this file is validation's
            raise ConfigError("validation.path", str(exc).split(": ", 1)[-1]) from None
        if not raw:
            raise ConfigError("validation.path", f"{v.path} holds no questions")
        return _as_rows(config, raw)
    return _as_rows(config, _question_rows(config.data.path)[-v.questions :])
