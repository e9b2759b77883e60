from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "webapp.training"
    label = "training"
    verbose_name = "training runs"

    def ready(self) -> None:
        from webapp.runs import hooks
        from webapp.runs.models import Run
        from webapp.training.services import training_mark_crashed, training_stop_request

        supervisor = hooks.Supervisor(
            mark_crashed=training_mark_crashed,
            stop=training_stop_request,
            status_template="training/_run_status_part.html",
        )
        hooks.supervisor_register(kinds=Run.SUPERVISED_KINDS, supervisor=supervisor)
        hooks.run_panel_register(
            "trainer executor", template="training/_run_facts.html", order=10, place="facts"
        )
