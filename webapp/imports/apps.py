from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "webapp.imports"
    label = "imports"
