from celery import shared_task

from webapp.evaluation.services import evaluation_run_execute


@shared_task
def evaluation_run_task(run_id: int) -> None:
    """Queue ``default`` (the routes send only ``judge_*`` tasks to the judge queue)."""
    evaluation_run_execute(run_id=run_id)
