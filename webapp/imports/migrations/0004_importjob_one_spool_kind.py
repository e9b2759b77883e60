"""One kind for spools: a run's, an experiment's and the older experiment bundle are told apart by what they hold
(webapp.imports.replay); jobs of the two kinds before become jobs of this one."""

from typing import Any

from django.db import migrations, models


def one_spool_kind(apps: Any, schema_editor: Any) -> None:
    ImportJob = apps.get_model("imports", "ImportJob")
    ImportJob.objects.filter(kind__in=("experiment", "run_spool")).update(kind="spool")


class Migration(migrations.Migration):
    dependencies = [
        ("imports", "0003_importjob_run_spool_kind"),
    ]

    operations = [
        migrations.AlterField(
            model_name="importjob",
            name="kind",
            field=models.CharField(
                choices=[
                    ("corpus", "corpus (FlashRAG JSONL)"),
                    ("dataset", "dataset (FlashRAG JSONL)"),
                    ("dataset_parquet", "dataset (Search-R1 parquet)"),
                    ("trajectories", "trajectories (JSONL)"),
                    ("spool", "spool (.tar.gz of a run's or an experiment's spool folder)"),
                ],
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="importjob",
            name="options",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="trajectories: run_id, dataset name; spool: run_id (a run spool: written into, or the run made), index_id (an experiment spool's index), then the experiment_id made",
            ),
        ),
        migrations.RunPython(one_spool_kind, migrations.RunPython.noop),
    ]
