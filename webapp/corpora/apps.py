from django.apps import AppConfig


class CorporaConfig(AppConfig):
    name = "webapp.corpora"
    label = "corpora"
