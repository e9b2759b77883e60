from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "webapp.datasets"
    label = "qa_datasets"  # not "datasets": keeps clear of the Hugging Face package of that name
    verbose_name = "Datasets"
