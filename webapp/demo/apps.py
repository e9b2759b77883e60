from django.apps import AppConfig


class DemoConfig(AppConfig):
    """`manage.py demo` and the demo's data: seeding, the demo index, the warm start it runs beside the server."""

    name = "webapp.demo"
    label = "demo"
