from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "webapp.evaluation"
    label = "evaluation"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        from webapp.evaluation.selectors import evaluation_pooled_rows
        from webapp.runs import hooks
        from webapp.runs.models import Run

        hooks.summary_rows_register("evaluation", evaluation_pooled_rows)
        hooks.run_panel_register(
            "evaluation report",
            template="evaluation/_report_slot.html",
            order=10,
            shows=lambda run: run.kind == Run.Kind.EVAL,
        )
