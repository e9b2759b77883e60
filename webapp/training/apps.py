from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "webapp.training"
    label = "training"
    verbose_name = "training runs"
