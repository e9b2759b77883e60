from celery import shared_task

from webapp.api.services import score_job_run


@shared_task
def score_job_run_task(job_id: int) -> None:
    score_job_run(job_id=job_id)
