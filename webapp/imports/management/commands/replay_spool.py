"""``manage.py replay_spool PATH``: a run made (or an experiment run) on a machine without searchlab, brought in
from its spool (webapp.imports.replay)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.common.commands import user_by_name_option
from webapp.common.importing import DataImportError
from webapp.imports.replay import replay_path


class Command(BaseCommand):
    help = (
        "Replay a spool written on a machine without searchlab: a run's (python -m trainer.report_client "
        "--spool-only; its run is made from manifest.json, or --run) or an experiment's (python -m trainer.jobs "
        "experiment --out DIR; its experiment, stages and runs, and the table printed), or an older experiment "
        "bundle of the runner's predecessor (docs/experiments/). PATH is the folder or a .tar.gz of it. Replaying again adds only what "
        "is new; an unreadable file stores nothing and is named with its line and field."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("spool", help="the spool folder, or a .tar.gz of it")
        parser.add_argument(
            "--run",
            type=int,
            default=None,
            help="run spool: write into this run instead of a new one (needed for a spool without a manifest: what "
            "a client reporting over HTTP left undelivered)",
        )
        parser.add_argument(
            "--index",
            default=None,
            help="experiment: a local index folder of the same corpus (default: the ready index whose corpus "
            "checksum is the spool's)",
        )
        parser.add_argument("--name", default="", help="experiment: its name (default: from the spool)")
        parser.add_argument("--user", default="", help="username recorded as the creator")

    def handle(self, *args: Any, spool: str, run: int | None, **options: Any) -> None:
        started = time.perf_counter()
        user = user_by_name_option(options["user"])
        try:
            replayed = replay_path(
                spool, index_folder=options["index"], run_id=run, user=user, name=options["name"]
            )
        except DataImportError as exc:
            raise CommandError(str(exc)) from exc
        for line in replayed.lines:
            self.stdout.write(line)
        self.stdout.write(f"replayed in {time.perf_counter() - started:.1f} s")
