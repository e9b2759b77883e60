from celery import shared_task

from webapp.imports.services import import_job_run


@shared_task
def import_job_run_task(job_id: int) -> None:
    import_job_run(job_id=job_id)
