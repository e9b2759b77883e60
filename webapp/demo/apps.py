from django.apps import AppConfig


class DemoConfig(AppConfig):
    """`manage.py demo` and the demo's data: seeding, the demo index, the warm start it runs beside the server."""

    name = "webapp.demo"
    label = "demo"

    def ready(self) -> None:
        from webapp.demo.selectors import warm_model_refusal
        from webapp.training import model_checks

        model_checks.model_check_register("demo warm model", warm_model_refusal)
        model_checks.model_notice_register("demo warm model", "demo/_warm_model_notice_slot.html")
