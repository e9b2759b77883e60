"""A run on a machine without the web app: its reports kept in a spool folder, to be replayed into searchlab later.

Standard library only, like :mod:`trainer.report_client`. ``python -m trainer.report_client --spool-only --spool DIR
--config CONFIG --output-dir OUT -- COMMAND…`` runs the trainer with no URL: every batch the report client would
send (metrics, samples, progress, log tail, final status) is written to ``DIR`` and stays there. The folder holds

* ``manifest.json``: what the run is (:func:`manifest_for`: its id, name, method, algorithm, model, the trainer's
  config, the command, the host, when it started and ended, the exit code);
* ``000000000001.json``, …: the batches, in order, each one JSON object on one line (the report client's spool);
* ``dead-letter.jsonl``: rows never spooled (a NaN metric), one JSON line each;
* ``trainer.log``: the trainer's output.

``manage.py replay_spool DIR`` (or the Imports page, with the folder as a ``.tar.gz``) stores the batches through
searchlab's ingest path (``webapp.training.spool_replay``). Replaying is idempotent: the manifest's ``id`` finds the
run a first replay made, and ingest stores a metric per (run, step, key) and a sample per key once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer.report_client import OutputTailer, ReportClient, report_while_running

MANIFEST_FILE = "manifest.json"
DEAD_LETTER_FILE = "dead-letter.jsonl"
LOG_FILE = "trainer.log"
FORMAT = "searchlab-spool"
VERSION = 1


class SpoolFileError(ValueError):
    """A spool file that cannot be read: its name (relative to the spool), the line and what is wrong."""

    def __init__(self, file: str, line: int | None, message: str) -> None:
        self.file, self.line, self.message = file, line, message
        super().__init__(f"{file}" + (f", line {line}" if line is not None else "") + f": {message}")


class SpoolWriter(ReportClient):
    """A report client that sends nothing: every batch is spooled and stays (it never flushes)."""

    def __init__(self, spool_dir: str | Path) -> None:
        spool = Path(spool_dir)
        super().__init__("", 0, "", spool, dead_letter=spool / DEAD_LETTER_FILE)

    def flush(self) -> bool:
        return True  # nothing to send: the batches wait in the spool for a replay

    def summary(self) -> dict[str, Any]:
        summary = super().summary()
        summary["batches_spooled"], summary["batches_pending"] = summary["batches_pending"], 0
        return summary


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_json_object(path: Path, shown: str) -> dict[str, Any]:
    """The JSON object in ``path``; :class:`SpoolFileError` names ``shown``, the line and the reason otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpoolFileError(shown, None, f"not UTF-8 text: byte {exc.start} ({exc.reason})") from None
    except OSError as exc:
        raise SpoolFileError(shown, None, f"cannot be read: {exc.strerror or exc}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpoolFileError(shown, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise SpoolFileError(shown, 1, f"invalid JSON: {str(exc)[:200]}") from None
    if not isinstance(value, dict):
        raise SpoolFileError(shown, 1, f"expected a JSON object, got {type(value).__name__}")
    return value


def manifest_for(
    config: Mapping[str, Any],
    *,
    name: str,
    command: Sequence[str],
    method: str = "",
    algorithm: str = "",
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of a detached run: the method, algorithm and model default to the trainer config's
    (``method``, ``algorithm``, ``model.path``); a folder spooled to before keeps its id (a resumed run)."""
    model = config.get("model")
    model = model if isinstance(model, Mapping) else {}
    return {
        "format": FORMAT,
        "version": VERSION,
        "id": str((previous or {}).get("id") or uuid.uuid4()),
        "name": name,
        "method": method or str(config.get("method") or "hiprag"),
        "algorithm": algorithm or str(config.get("algorithm") or "grpo"),
        "model_name": str(model.get("path") or ""),
        "config": dict(config),
        "command": list(command),
        "host": socket.gethostname(),
        "started_at": _now(),
        "finished_at": None,
        "exit_code": None,
    }


def write_manifest(spool_dir: Path, manifest: Mapping[str, Any]) -> None:
    spool_dir.mkdir(parents=True, exist_ok=True)
    path = spool_dir / MANIFEST_FILE
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)


def previous_manifest(spool_dir: Path) -> dict[str, Any] | None:
    try:
        return read_json_object(spool_dir / MANIFEST_FILE, MANIFEST_FILE)
    except SpoolFileError:
        return None


def finish_manifest(spool_dir: Path, manifest: Mapping[str, Any], exit_code: int) -> None:
    write_manifest(spool_dir, {**manifest, "finished_at": _now(), "exit_code": exit_code})


def batch_files(spool_dir: Path) -> list[Path]:
    """The spooled batches in the order they were written (``.tmp`` files, never renamed into place, left out)."""
    return sorted(p for p in spool_dir.glob("*.json") if p.stem.isdigit())


def read_batches(spool_dir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(file name, batch)`` for each spooled batch in order; :class:`SpoolFileError` at an unreadable one."""
    for path in batch_files(spool_dir):
        yield path.name, read_json_object(path, path.name)


def dead_letter_count(spool_dir: Path) -> int:
    """Rows the trainer's client never spooled (kept in ``dead-letter.jsonl``)."""
    try:
        with (spool_dir / DEAD_LETTER_FILE).open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    except FileNotFoundError:
        return 0


def run_detached(
    command: Sequence[str],
    spool_dir: str | Path,
    config: Mapping[str, Any],
    output_dir: str | Path,
    *,
    name: str = "",
    method: str = "",
    algorithm: str = "",
    interval: float = 1.0,
) -> int:
    """``python -m trainer.report_client --spool-only``: the manifest first (so even a crashed run's spool can become
    a run), the batches while the trainer runs, the exit code and end time in the manifest last; the exit code."""
    folder = Path(spool_dir)
    manifest = manifest_for(
        config,
        name=name or folder.resolve().name,
        command=command,
        method=method,
        algorithm=algorithm,
        previous=previous_manifest(folder),
    )
    write_manifest(folder, manifest)
    log_path = folder / LOG_FILE
    code = report_while_running(
        command,
        SpoolWriter(folder),
        OutputTailer(output_dir, log_path=log_path),
        log_path=log_path,
        interval=interval,
        drain_seconds=0.0,
    )
    finish_manifest(folder, manifest, code)
    return code
