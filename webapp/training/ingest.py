"""Reading what the trainer writes: JSON lines appended to files, and its log, turned into what the web app stores."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from scoring import formats
from webapp.trajectories.services import TrajectoryInput, VerdictInput

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 200
_LOG_TAIL_BYTES = 256 * 1024
OUTCOMES = ("true", "false", "error")


def read_new_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete JSON lines appended after byte ``offset``, and the offset after the last complete line.

    A line the trainer is still writing (no newline yet) is left for the next call. A line that is not a JSON
    object is logged and skipped, so one bad line cannot stall a run's curves.
    """
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n")
    if end < 0:
        return [], offset
    rows: list[dict[str, Any]] = []
    for raw in chunk[: end + 1].splitlines():
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            row = None
        if isinstance(row, dict):
            rows.append(row)
        else:
            logger.warning("%s: skipped a line that is not a JSON object: %r", path, raw[:200])
    return rows, offset + end + 1


def metric_rows(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows with a step, a key, a finite value and a time (NaN/inf are dropped: JSON and charts reject them)."""
    kept = []
    for row in rows:
        try:
            step, value, when = int(row["step"]), float(row["value"]), float(row["time"])
        except (KeyError, TypeError, ValueError):
            continue
        if step >= 0 and isinstance(row.get("key"), str) and value == value and abs(value) != float("inf"):
            kept.append({"step": step, "key": row["key"], "value": value, "time": when})
    return kept


# Library warnings every CPU run prints, which say nothing about the run (the log file keeps them): Python's
# "file:line: FutureWarning: …" lines (and the indented source line quoted under each), transformers/TRL notices.
_NOISE = re.compile(
    r"(?:^\S+:\d+: (?:Future|Deprecation|Pending\w*|User|Runtime)Warning: )"
    r"|(?:^\s+warnings\.warn\()"
    r"|(?:generation flags are not valid and may be ignored)"
    r"|(?:Setting `pad_token_id` to `eos_token_id`)"
    r"|(?:`torch_dtype` is deprecated)"
    r"|(?:Passing `generation_config` together with generation-related arguments)"
)


def read_progress(output_dir: Path) -> dict[str, Any] | None:
    """The trainer's newest heartbeat (trainer.progress), or None."""
    from trainer.progress import read_progress as read

    return read(output_dir)


def is_noise(line: str) -> bool:
    return _NOISE.search(line) is not None


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of the trainer's stdout/stderr, known library warnings left out (:data:`_NOISE`);
    progress bars' carriage returns count as lines."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - _LOG_TAIL_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace").replace("\r", "\n")
    kept: list[str] = []
    after_warning = False
    for line in text.split("\n"):
        if not line.strip():
            continue
        if is_noise(line) or (after_warning and line.startswith((" ", "\t"))):
            after_warning = "Warning: " in line
            continue
        after_warning = False
        kept.append(line)
    return "\n".join(kept[-lines:])


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def sample_input(
    row: Mapping[str, Any],
    *,
    run_id: int,
    method: str,
    judge_model: str,
    questions: Mapping[str, tuple[int, int]],
) -> TrajectoryInput | None:
    """One samples.jsonl row (trainer.callbacks.sample_row) as a trajectory to store, or None if unusable.

    ``questions`` maps the dataset's external ids to (question pk, dataset pk), so stored samples link to their
    question; the trainer's ids of a repeated rollout look like ``q17`` (agent rollouts append ``#n``).
    """
    text = row.get("text")
    if not isinstance(text, str):
        return None
    parsed = formats.parse(method, text)
    known_steps = {step.index for step in parsed.steps}
    verdicts = []
    for step in row.get("steps") or ():
        if not isinstance(step, dict) or step.get("index") not in known_steps:
            continue
        for verdict in step.get("verdicts") or ():
            outcome = str(verdict.get("outcome", "error")).lower()
            verdicts.append(
                VerdictInput(
                    detector=str(verdict.get("detector")),
                    outcome=outcome if outcome in OUTCOMES else "error",
                    judge_model=judge_model,
                    step_index=step["index"],
                    raw_reply="" if outcome in OUTCOMES else f"judge outcome {outcome!r}",
                )
            )
    question_id = str(row.get("question_id") or "").split("#", 1)[0]
    question_pk, dataset_pk = questions.get(question_id, (None, None))
    components = row.get("components") if isinstance(row.get("components"), dict) else {}
    step_rewards = row.get("step_rewards")
    golds = row.get("golden_answers")
    return TrajectoryInput(
        parsed=parsed,
        golden_answers=[str(g) for g in golds] if isinstance(golds, list) else [],
        question_text=str(row.get("question") or ""),
        question_id=question_pk,
        dataset_id=dataset_pk,
        run_id=run_id,
        training_step=int(row["step"]) if isinstance(row.get("step"), int) else None,
        total_reward=_number(row.get("reward")),
        reward_components={k: float(v) for k, v in components.items() if _number(v) is not None},
        step_rewards=[float(r) if _number(r) is not None else 0.0 for r in step_rewards]
        if isinstance(step_rewards, list)
        else None,
        verdicts=verdicts,
        end_reason=str(row.get("end") or ""),
        cut_turns=int(row["cut_turns"]) if isinstance(row.get("cut_turns"), int) else 0,
    )
