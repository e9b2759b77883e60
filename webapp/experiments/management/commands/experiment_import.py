"""``python manage.py experiment_import BUNDLE``: store an experiment that ran elsewhere (``bench/experiment_gpu.py``'s
``.tar.gz``) as the web app's own, and print its table (webapp.experiments.bundles)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.common.commands import user_by_name_option
from webapp.common.importing import DataImportError
from webapp.experiments.bundles import experiment_import
from webapp.experiments.reporting import result_text
from webapp.experiments.specs import ExperimentConfigError


class Command(BaseCommand):
    help = (
        "Import bench/experiment_gpu.py's bundle (a .tar.gz) as an experiment: its arms, training curves, "
        "evaluations and table, shown on the experiment and compare pages."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("bundle", help="the .tar.gz the script wrote (--bundle)")
        parser.add_argument(
            "--index",
            default="var/retrieval/indexes/wiki_multihop-bm25",
            help="a local index folder of the same corpus (its checksum is checked against the bundle's)",
        )
        parser.add_argument("--name", default="", help="the experiment's name (default: from the bundle)")
        parser.add_argument("--user", default="", help="username recorded as the creator")

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_by_name_option(options["user"])
        try:
            experiment = experiment_import(
                path=options["bundle"], index_folder=options["index"], name=options["name"], user=user
            )
        except DataImportError as exc:
            raise CommandError(str(exc)) from None
        except ExperimentConfigError as exc:
            raise CommandError(f"--{exc.field}: {exc.message}") from None
        self.stdout.write(f"experiment #{experiment.pk} {experiment.name}: {experiment.status}")
        if experiment.error:
            self.stdout.write(experiment.error)
        self.stdout.write(result_text(experiment.result))
