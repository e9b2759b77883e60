"""The experiment spool's writer: one folder the web app replays into one experiment (its contract below).

``DIR/manifest.json`` (``searchlab-experiment-spool``), ``log.txt``, ``index_metadata.json``, ``questions/*.jsonl``,
``screen_yield.json``, ``warm_start/``, ``stages/<key>/`` (an evaluation stage: its manifest and ``records.jsonl``;
a training stage: a run spool exactly as :mod:`trainer.spool` writes it), ``result.json`` and ``result.md``. Every
file is written atomically (``X.partial``, then :func:`os.replace`) and the manifest is refreshed after every
stage, so a spool cut short at any moment replays what finished. A run resumed into the same folder keeps the
manifest's id and skips each stage whose status is ``finished``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from trainer import spool as run_spool

FORMAT = "searchlab-experiment-spool"
EVALUATION_FORMAT = "searchlab-evaluation-spool"
VERSION = 1
MANIFEST = "manifest.json"
PHASES = ("base_model", "warm_start", "screen", "start_eval", "training", "eval")


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_text(path: Path, text: str) -> None:
    """``path`` replaced atomically: a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_json(path: Path, value: Any) -> None:
    write_text(path, json.dumps(value, indent=1, ensure_ascii=False) + "\n")


def write_rows(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class Log:
    """``DIR/log.txt``: one line per event, ``[  12.3 s] message``, echoed to stdout."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def __call__(self, message: str) -> None:
        line = f"[{self.elapsed():7.1f} s] {message}"
        print(line, flush=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")


class ExperimentSpool:
    """``DIR`` as an experiment spool: its manifest (kept in memory, written after every change) and stages."""

    def __init__(self, root: Path, header: Mapping[str, Any]) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.log = Log(root / "log.txt")
        previous = read_json(root / MANIFEST) or {}
        phases = {name: 0.0 for name in PHASES}
        phases.update({k: float(v) for k, v in (previous.get("phases") or {}).items() if k in phases})
        self.manifest: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "id": str(previous.get("id") or uuid.uuid4()),
            **header,
            "host": socket.gethostname(),
            "started_at": previous.get("started_at") or now_iso(),
            "finished_at": None,
            "status": "running",
            "error": "",
            "phases": phases,
        }
        self.save()

    def save(self) -> None:
        write_json(self.root / MANIFEST, self.manifest)

    def update(self, **values: Any) -> None:
        self.manifest.update(values)
        self.save()

    def add_phase(self, phase: str, seconds: float) -> None:
        """Wall seconds spent in ``phase`` (added up over resumed runs)."""
        self.manifest["phases"][phase] = round(self.manifest["phases"].get(phase, 0.0) + seconds, 1)
        self.save()

    def finish(self, status: str = "finished", error: str = "") -> None:
        self.update(status=status, error=error, finished_at=now_iso())

    def stage(self, key: str) -> Path:
        return self.root / "stages" / key

    def stage_finished(self, key: str) -> bool:
        return stage_finished(self.stage(key))


def stage_finished(folder: Path) -> bool:
    """An evaluation stage whose manifest says finished, or a training stage whose trainer exited 0."""
    manifest = read_json(folder / MANIFEST) or {}
    if manifest.get("format") == run_spool.FORMAT:
        return manifest.get("exit_code") == 0
    return manifest.get("status") == "finished"


def evaluation_manifest(
    *,
    role: str,
    method: str,
    model: str,
    temperature: float,
    questions: int,
    arm: str = "",
    seed: int | None = None,
    sample: int = 0,
) -> dict[str, Any]:
    """An evaluation stage's manifest as it starts (``status`` running; :func:`end_evaluation` closes it)."""
    return {
        "format": EVALUATION_FORMAT,
        "version": VERSION,
        "role": role,
        "method": method,
        "arm": arm,
        "seed": seed,
        "sample": sample,
        "model": model,
        "temperature": temperature,
        "questions": questions,
        "started_at": now_iso(),
        "finished_at": None,
        "status": "running",
        "error": "",
        "seconds": None,
    }


def end_evaluation(folder: Path, manifest: Mapping[str, Any], *, seconds: float, error: str = "") -> None:
    write_json(
        folder / MANIFEST,
        {
            **manifest,
            "finished_at": now_iso(),
            "status": "failed" if error else "finished",
            "error": error,
            "seconds": round(seconds, 1),
        },
    )


def clear_run_spool(folder: Path) -> None:
    """A training stage about to rerun: its batches, log and dead letters go; its manifest stays (its id, so a
    replay updates the run it made before instead of making a second one)."""
    if not folder.is_dir():
        return
    for path in run_spool.batch_files(folder):
        path.unlink()
    for name in (run_spool.LOG_FILE, run_spool.DEAD_LETTER_FILE, "timing.csv"):
        (folder / name).unlink(missing_ok=True)
