import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = (
        ("runs", "0002_progress_and_warm_start"),
        ("training", "0001_initial"),
    )

    operations = (
        migrations.AddField(
            model_name="trainingprocess",
            name="executor",
            field=models.CharField(default="local", max_length=16),
        ),
        migrations.AddField(
            model_name="trainingprocess",
            name="job_id",
            field=models.CharField(blank=True, help_text="the Ray job's submission id", max_length=200),
        ),
        migrations.CreateModel(
            name="IngestedSample",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="ingested_samples",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("run", "key"), name="ingested_sample_once_per_run")
                ],
            },
        ),
    )
