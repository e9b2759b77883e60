from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.common.importing import DataImportError
from webapp.training.spool_replay import spool_archive_replay, spool_replay


class Command(BaseCommand):
    help = (
        "Replay the spool of a run made on a machine without searchlab (python -m trainer.report_client "
        "--spool-only): its run is made from the spool's manifest.json (or --run), and every spooled batch is "
        "stored through the ingest path, each row checked. Replaying again adds nothing. DIR is the spool folder "
        "or a .tar.gz of it; an unreadable spool file stores nothing and is named with its line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("spool", help="the spool folder, or a .tar.gz of it")
        parser.add_argument(
            "--run",
            type=int,
            default=None,
            help="write into this run instead of a new one (needed for a spool without a manifest: what a client "
            "reporting over HTTP left undelivered)",
        )

    def handle(self, *args: Any, spool: str, run: int | None, **options: Any) -> None:
        started = time.perf_counter()
        path = Path(spool)
        try:
            if path.is_file():
                result = spool_archive_replay(path, run_id=run, label=str(path))
            else:
                result = spool_replay(path, run_id=run)
        except DataImportError as exc:
            raise CommandError(str(exc)) from exc
        for line in result.lines():
            self.stdout.write(line)
        self.stdout.write(f"replayed in {time.perf_counter() - started:.1f} s")
