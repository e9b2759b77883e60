"""One replay for every spool (``manage.py replay_spool``, the Imports page's *spool*): a run spool
(:mod:`webapp.training.spool_replay`), an experiment spool (:mod:`webapp.experiments.spool_replay`) or the older
experiment bundle (:mod:`webapp.experiments.legacy_bundle`), told apart by the ``format`` of their ``manifest.json``
(a bundle has ``experiment.json`` instead). A folder, or a ``.tar.gz`` holding it as its top or one folder down."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser

from trainer import spool as run_spool
from webapp.common.importing import DataImportError
from webapp.experiments.legacy_bundle import DESCRIPTION, bundle_to_spool, is_legacy_bundle
from webapp.experiments.spool_reading import FORMAT as EXPERIMENT_FORMAT
from webapp.experiments.spool_replay import experiment_spool_replay
from webapp.training.spool_replay import spool_replay, unpack_spool
from webapp.trajectories.models import Trajectory

MARKERS = (run_spool.MANIFEST_FILE, DESCRIPTION)


@dataclass
class Replayed:
    """What a replay stored: the lines to print, the run or experiment, and the count an import job shows."""

    lines: list[str] = field(default_factory=list)
    run_id: int | None = None
    experiment_id: int | None = None
    records: int = 0
    refused: int = 0


def _manifest_format(folder: Path) -> object:
    try:
        raw = json.loads((folder / run_spool.MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None  # the run spool's replay names what is wrong with it
    return raw.get("format") if isinstance(raw, dict) else None


def _experiment(
    folder: Path, shown: str, index_folder: str | Path | None, user: AbstractBaseUser | None, name: str
) -> Replayed:
    replay = experiment_spool_replay(folder, index_folder=index_folder, name=name, user=user, label=shown)
    experiment = replay.experiment
    count = Trajectory.objects.filter(run__experiment_links__experiment=experiment).count()
    return Replayed(lines=replay.lines(), experiment_id=experiment.pk, records=count)


def replay_folder(
    folder: Path,
    *,
    shown: str = "",
    index_folder: str | Path | None = None,
    run_id: int | None = None,
    user: AbstractBaseUser | None = None,
    name: str = "",
) -> Replayed:
    shown = shown or str(folder)
    is_experiment = is_legacy_bundle(folder) or _manifest_format(folder) == EXPERIMENT_FORMAT
    if is_experiment and run_id is not None:
        message = "an experiment's spool makes its own runs: a run to write into is for a run spool"
        raise DataImportError(file=shown, line=None, field="run", message=message)
    if is_legacy_bundle(folder):
        scratch = settings.VAR_DIR if Path(settings.VAR_DIR).is_dir() else None
        with tempfile.TemporaryDirectory(prefix="bundle-", dir=scratch) as target:
            return _experiment(bundle_to_spool(folder, Path(target), shown), shown, index_folder, user, name)
    if is_experiment:
        return _experiment(folder, shown, index_folder, user, name)
    result = spool_replay(folder, run_id=run_id, user=user, label=shown)
    return Replayed(
        lines=result.lines(),
        run_id=result.run_id,
        records=result.metrics + result.samples,
        refused=len(result.refused),
    )


def replay_path(
    path: str | Path,
    *,
    label: str = "",
    index_folder: str | Path | None = None,
    run_id: int | None = None,
    user: AbstractBaseUser | None = None,
    name: str = "",
) -> Replayed:
    """Replay the spool at ``path`` (a folder, or a ``.tar.gz`` of it); ``label`` names it in errors (an upload's
    own name), by default the path. Raises DataImportError (the spool, file, line and field at fault)."""
    path = Path(path)
    if path.is_dir():
        return replay_folder(
            path, shown=label or str(path), index_folder=index_folder, run_id=run_id, user=user, name=name
        )
    if not path.is_file():
        raise DataImportError(
            file=label or str(path), line=None, field=None, message="no such file or folder"
        )
    shown = label or path.name
    with unpack_spool(path, shown, markers=MARKERS) as folder:
        top = folder.parent.name.startswith("spool-")  # one folder down: named as the archive's member
        return replay_folder(
            folder,
            shown=f"{shown}:{folder.name}" if top else shown,
            index_folder=index_folder,
            run_id=run_id,
            user=user,
            name=name,
        )
