"""ExperimentRun.seed: the seed pair a train or eval stage belongs to. A stored experiment had one seed pair, its
spec's training.seed (under ``run``, or flat as ``seed`` before ``run`` held the knobs; the trainer's default 0 when
unset): every link of it gets that seed, so it loads and resumes as before."""

from django.db import migrations, models


def spec_seed(spec: dict) -> int:
    training = ((spec or {}).get("run") or {}).get("training") or {}
    seed = training.get("seed", (spec or {}).get("seed"))
    return int(seed) if seed is not None else 0


def seed_links(apps, schema_editor):
    Experiment = apps.get_model("experiments", "Experiment")
    ExperimentRun = apps.get_model("experiments", "ExperimentRun")
    for experiment in Experiment.objects.all():
        ExperimentRun.objects.filter(experiment=experiment).update(seed=spec_seed(experiment.spec))


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0003_screen"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="experimentrun",
            name="experiment_arm_stage_unique",
        ),
        migrations.AddField(
            model_name="experimentrun",
            name="seed",
            field=models.PositiveIntegerField(
                default=0,
                help_text="the seed pair's seed (training.seed) of a train or eval stage; the experiment's first "
                "seed for the stages every pair shares (the screen, the start model's evaluation)",
            ),
        ),
        migrations.RunPython(seed_links, migrations.RunPython.noop),
        migrations.AlterModelOptions(
            name="experimentrun",
            options={"ordering": ("experiment", "position", "seed")},
        ),
        migrations.AddConstraint(
            model_name="experimentrun",
            constraint=models.UniqueConstraint(
                fields=("experiment", "role", "method", "arm", "seed"), name="experiment_seed_stage_unique"
            ),
        ),
    ]
