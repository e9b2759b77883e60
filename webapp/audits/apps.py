from django.apps import AppConfig


class AuditsConfig(AppConfig):
    name = "webapp.audits"
    label = "audits"

    def ready(self) -> None:
        from webapp.runs import hooks

        hooks.run_panel_register("audit drift", template="audits/_run_drift_panel.html", order=20)
