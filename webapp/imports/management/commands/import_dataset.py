from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.common.importing import DataImportError
from webapp.datasets.services import dataset_import


class Command(BaseCommand):
    help = "Import questions as a new dataset: FlashRAG JSONL (default) or Search-R1 parquet (--format search_r1)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path")
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--format", dest="file_format", choices=["flashrag", "search_r1"], default="flashrag"
        )

    def handle(self, *args: Any, path: str, name: str, file_format: str, **options: Any) -> None:
        started = time.perf_counter()
        try:
            dataset = dataset_import(name=name, path=path, file_format=file_format)
        except (DataImportError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"dataset {dataset.name}: {dataset.question_count} questions in "
            f"{time.perf_counter() - started:.1f} s"
        )
