from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "webapp.evaluation"
    label = "evaluation"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        from webapp.evaluation.selectors import evaluation_pooled_rows
        from webapp.runs import hooks

        hooks.summary_rows_register("evaluation", evaluation_pooled_rows)
