from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from webapp.corpora.models import Corpus
from webapp.corpora.services import corpus_import
from webapp.datasets.models import Dataset
from webapp.datasets.services import dataset_import


class Command(BaseCommand):
    help = (
        "Import the shared wiki_multihop corpus and questions (from $SEARCHLAB_SHARED_DIR/data/wiki_multihop) as the "
        "corpus and dataset 'wiki_multihop', and print how long it took."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", default="wiki_multihop")
        parser.add_argument(
            "--replace", action="store_true", help="delete an earlier import of the same name first"
        )

    def handle(self, *args: Any, name: str, replace: bool, **options: Any) -> None:
        folder = settings.SHARED_DIR / "data" / "wiki_multihop"
        if not folder.is_dir():
            raise CommandError(f"{folder} not found; set SEARCHLAB_SHARED_DIR")
        if replace:
            with transaction.atomic():
                Dataset.objects.filter(name=name).delete()
                Corpus.objects.filter(name=name).delete()
        started = time.perf_counter()
        corpus = corpus_import(name=name, path=folder / "corpus.jsonl")
        corpus_seconds = time.perf_counter() - started
        dataset = dataset_import(name=name, path=folder / "questions.jsonl")
        total = time.perf_counter() - started
        self.stdout.write(
            f"{connection.vendor}: {corpus.passage_count} passages in {corpus_seconds:.1f} s, "
            f"{dataset.question_count} questions in {total - corpus_seconds:.1f} s; total {total:.1f} s"
        )
