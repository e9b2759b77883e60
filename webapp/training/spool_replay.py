"""A detached run's spool replayed into searchlab: how a machine without the web app reports (trainer.spool).

:func:`spool_replay` makes the run its manifest describes (a train run whose executor is ``external``, as a run
reported over HTTP), or writes into a run named with ``run_id``, and stores every spooled batch with the ingest
path's :func:`webapp.training.ingest.store_batch` (each row checked; rows refused are counted and named). A second
replay of the same spool finds the run by the manifest's id and adds nothing. The replay is one transaction: an
unreadable spool file stops it with a :class:`DataImportError` naming the file and the line, nothing of it stored
and nothing of the spool touched (it is only read). ``manage.py replay_spool`` and the Imports page (a ``.tar.gz``
of the folder, :func:`unpack_spool`) call it.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from trainer import spool
from trainer.placement import CONFIG_KEY, Placement
from webapp.common.importing import DataImportError
from webapp.runs.models import Method, Run
from webapp.runs.services import run_create, run_mark_started
from webapp.training.ingest import store_batch

EXECUTOR = Placement.EXTERNAL.value  # a run its own trainer reports (webapp.training.reporting.is_reported)


@dataclass
class ReplayResult:
    run_id: int
    created: bool
    batches: int = 0
    metrics: int = 0
    metrics_duplicate: int = 0
    samples: int = 0
    samples_duplicate: int = 0
    refused: list[dict[str, Any]] = field(
        default_factory=list
    )  # {"file", "kind", "index", "field", "reason"}
    dead_letter: int = 0  # rows the trainer's client never spooled (the spool's dead-letter.jsonl)

    def lines(self) -> list[str]:
        lines = [
            f"run {self.run_id} ({'created' if self.created else 'existing'}): {self.batches} batches, "
            f"{self.metrics} metrics stored ({self.metrics_duplicate} already stored), {self.samples} samples "
            f"stored ({self.samples_duplicate} already stored), {len(self.refused)} refused, "
            f"{self.dead_letter} never spooled (dead-letter.jsonl)"
        ]
        lines += [
            f"  refused: {r['file']} {r['kind']}[{r['index']}].{r['field']}: {r['reason']}"
            for r in self.refused
        ]
        return lines


@dataclass(frozen=True)
class Manifest:
    id: str
    name: str
    method: str
    algorithm: str
    model_name: str
    config: dict[str, Any]
    host: str
    started_at: dt.datetime | None
    finished_at: dt.datetime | None


def _timestamp(value: Any, name: str, label: str) -> dt.datetime | None:
    if value is None:
        return None
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise DataImportError(file=label, line=None, field=name, message=f"not a time: {value!r}") from None


def read_manifest(folder: Path, label: str = "") -> Manifest:
    """The spool's manifest.json, checked: a known method and algorithm, a name and a model, a config object."""
    shown = f"{label or folder}/{spool.MANIFEST_FILE}"
    if not (folder / spool.MANIFEST_FILE).exists():
        message = "missing (the spool of a client that reported over HTTP has none: name its run with --run)"
        raise DataImportError(file=shown, line=None, field=None, message=message)
    try:
        raw = spool.read_json_object(folder / spool.MANIFEST_FILE, shown)
    except spool.SpoolFileError as exc:
        raise DataImportError(file=exc.file, line=exc.line, field=None, message=exc.message) from None

    def text(name: str, choices: Any = None) -> str:
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise DataImportError(file=shown, line=None, field=name, message="must be a non-empty string")
        if choices is not None and value not in choices:
            known = ", ".join(choices)
            raise DataImportError(
                file=shown, line=None, field=name, message=f"{value!r} is not one of {known}"
            )
        return value.strip()

    if raw.get("format") != spool.FORMAT:
        raise DataImportError(file=shown, line=None, field="format", message=f"must be {spool.FORMAT!r}")
    config = raw.get("config")
    if not isinstance(config, dict):
        raise DataImportError(file=shown, line=None, field="config", message="must be a JSON object")
    return Manifest(
        id=text("id"),
        name=text("name")[:200],
        method=text("method", Method.values),
        algorithm=text("algorithm", [a for a in Run.Algorithm.values if a != Run.Algorithm.SFT]),
        model_name=text("model_name")[:300],
        config=config,
        host=str(raw.get("host") or "")[:200],
        started_at=_timestamp(raw.get("started_at"), "started_at", shown),
        finished_at=_timestamp(raw.get("finished_at"), "finished_at", shown),
    )


def _run_config(manifest: Manifest) -> dict[str, Any]:
    """The trainer's config as the run's, placed ``external``; its trackers were the trainer's own, so searchlab
    does not mirror the rows to them again (webapp.training.trackers.run_trackers)."""
    config = {k: v for k, v in manifest.config.items() if k != "trackers"}
    return {**config, CONFIG_KEY: EXECUTOR, "spool": {"id": manifest.id, "host": manifest.host}}


def _named_run(run_id: int, manifest: Manifest | None) -> Run:
    """``--run``: a spool with a manifest of the same method, or one without (what a report client over HTTP left
    undelivered in its run folder's spool)."""
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise DataImportError(file=f"run {run_id}", line=None, field=None, message="no such run")
    if manifest is None:
        return run
    if run.method != manifest.method:
        message = f"a {run.method} run; the spool's manifest says {manifest.method}"
        raise DataImportError(file=f"run {run_id}", line=None, field="method", message=message)
    if not (run.config or {}).get("spool"):  # a later replay without --run finds it
        run.config = {**(run.config or {}), "spool": {"id": manifest.id, "host": manifest.host}}
        run.save(update_fields=["config"])
    return run


def _spool_run(manifest: Manifest, user: AbstractBaseUser | None) -> tuple[Run, bool]:
    """The run a replay of this spool made before (by the manifest's id), or a new one from the manifest."""
    found = Run.objects.filter(config__spool__id=manifest.id).order_by("pk").first()
    if found is not None:
        return found, False
    options = (manifest.config.get("rollout") or {}).get("options") or {}
    run = run_create(
        name=manifest.name,
        method=manifest.method,
        model_name=manifest.model_name,
        kind=Run.Kind.TRAIN,
        algorithm=manifest.algorithm,
        config=_run_config(manifest),
        created_by=user,
    )
    run = run_mark_started(run_id=run.pk)
    if isinstance(options, Mapping) and options.get("judge"):
        run.judge_settings = {"judge": options["judge"]}
        run.save(update_fields=["judge_settings"])
    return run, True


@transaction.atomic
def spool_replay(
    folder: str | Path, *, run_id: int | None = None, user: AbstractBaseUser | None = None, label: str = ""
) -> ReplayResult:
    """Store the spool in ``folder`` into its run (made from the manifest, found by its id, or ``run_id``)."""
    folder = Path(folder)
    shown = label or str(folder)
    if not folder.is_dir():
        raise DataImportError(file=shown, line=None, field=None, message="no such folder")
    if run_id is not None and not (folder / spool.MANIFEST_FILE).exists():
        manifest, run, created = None, _named_run(run_id, None), False
    else:
        manifest = read_manifest(folder, shown)
        run, created = (
            (_named_run(run_id, manifest), False) if run_id is not None else _spool_run(manifest, user)
        )
    result = ReplayResult(run_id=run.pk, created=created, dead_letter=spool.dead_letter_count(folder))
    try:
        for name, batch in spool.read_batches(folder):
            answer = store_batch(run_id=run.pk, batch=batch)
            result.batches += 1
            for key in ("metrics", "metrics_duplicate", "samples", "samples_duplicate"):
                setattr(result, key, getattr(result, key) + int(answer.get(key) or 0))
            result.refused += [{"file": name, **refusal} for refusal in answer.get("refused") or ()]
    except spool.SpoolFileError as exc:
        raise DataImportError(
            file=f"{shown}/{exc.file}", line=exc.line, field=None, message=exc.message
        ) from None
    if (
        run_id is None and manifest is not None
    ):  # a run made from this spool: the trainer's times, not the replay's
        _trainer_times(run.pk, manifest)
    return result


def _trainer_times(run_id: int, manifest: Manifest) -> None:
    """Start, end and last heartbeat as the trainer's machine saw them (the end only once a final status came: a
    spool replayed while its trainer still runs leaves the run running, heard from now)."""
    fields: dict[str, Any] = {"started_at": manifest.started_at} if manifest.started_at else {}
    if manifest.finished_at and Run.objects.filter(pk=run_id, finished_at__isnull=False).exists():
        fields["finished_at"] = fields["heartbeat_at"] = manifest.finished_at
    Run.objects.filter(pk=run_id).update(**fields)


# --- the Imports page: a .tar.gz of the folder ---------------------------------------------------------------------


def _check_members(archive: tarfile.TarFile, label: str) -> None:
    """Refuse, before writing anything, an archive beyond UPLOAD_MAX_UNPACKED_BYTES or UPLOAD_MAX_UNPACKED_FILES."""
    limits = (settings.UPLOAD_MAX_UNPACKED_BYTES, settings.UPLOAD_MAX_UNPACKED_FILES)
    total = 0
    for count, member in enumerate(archive, start=1):
        total += member.size if member.isfile() else 0
        if total > limits[0] or count > limits[1]:
            message = f"unpacks beyond {limits[0]:,} bytes or {limits[1]:,} members (UPLOAD_MAX_UNPACKED_*)"
            raise DataImportError(file=label, line=None, field=None, message=message + "; refused")


@contextmanager
def unpack_spool(
    path: Path, label: str = "", markers: tuple[str, ...] = (spool.MANIFEST_FILE,)
) -> Iterator[Path]:
    """The spool folder inside a ``.tar.gz``, unpacked to a temporary folder removed afterwards. Members that would
    land outside it, links and devices are refused (tarfile's "data" filter), and so is an archive over the
    unpacked-size limits; the folder is the one that holds one of ``markers`` (manifest.json; the archive's top, or
    one folder down: an experiment spool's stage folders, further down, hold manifests of their own)."""
    shown = label or path.name
    target = Path(
        tempfile.mkdtemp(prefix="spool-", dir=settings.VAR_DIR if settings.VAR_DIR.is_dir() else None)
    )
    try:
        try:
            with tarfile.open(path, "r:*") as archive:
                _check_members(archive, shown)
                archive.extractall(target, filter="data")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise DataImportError(
                file=shown, line=None, field=None, message=f"not a readable .tar.gz: {exc}"
            ) from None
        found = [target] if any((target / m).is_file() for m in markers) else []
        found = found or sorted({p.parent for m in markers for p in target.glob(f"*/{m}")})
        if len(found) != 1:
            message = f"expected one spool folder (with {' or '.join(markers)}), found {len(found)}"
            raise DataImportError(file=shown, line=None, field=None, message=message)
        yield found[0]
    finally:
        shutil.rmtree(target, ignore_errors=True)


def spool_archive_replay(
    path: Path, *, run_id: int | None = None, user: AbstractBaseUser | None = None, label: str = ""
) -> ReplayResult:
    with unpack_spool(path, label) as folder:
        return spool_replay(folder, run_id=run_id, user=user, label=label or path.name)
