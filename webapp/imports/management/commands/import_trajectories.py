from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.common.importing import DataImportError
from webapp.trajectories.services import trajectory_import


class Command(BaseCommand):
    help = (
        'Import agent responses (JSONL: "question_id" or "question"+"golden_answers", "response", "format", optional '
        '"run", "dataset", "step"; or chat trajectories: "question", "golds", "messages" with tool calls), parsed into '
        "steps. All or nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path")
        parser.add_argument("--run", type=int, default=None, help="run id for lines that name none")
        parser.add_argument("--dataset", default=None, help="dataset name for lines that name none")

    def handle(self, *args: Any, path: str, run: int | None, dataset: str | None, **options: Any) -> None:
        started = time.perf_counter()
        try:
            count = trajectory_import(path=path, run_id=run, dataset_name=dataset)
        except (DataImportError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{count} trajectories in {time.perf_counter() - started:.1f} s")
