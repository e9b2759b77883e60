from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.common.importing import DataImportError
from webapp.corpora.services import corpus_import


class Command(BaseCommand):
    help = 'Import a FlashRAG JSONL corpus ({"id", "contents": "Title\\ntext"} per line) as a new corpus.'

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path")
        parser.add_argument("--name", required=True)

    def handle(self, *args: Any, path: str, name: str, **options: Any) -> None:
        started = time.perf_counter()
        try:
            corpus = corpus_import(name=name, path=path)
        except (DataImportError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"corpus {corpus.name}: {corpus.passage_count} passages in {time.perf_counter() - started:.1f} s"
        )
