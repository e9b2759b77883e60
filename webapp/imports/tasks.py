from celery import shared_task

from webapp.imports.services import import_job_run, uploads_clean


@shared_task
def import_job_run_task(job_id: int) -> None:
    import_job_run(job_id=job_id)


@shared_task
def uploads_clean_task() -> int:
    """Celery beat, hourly: delete old uploads (``UPLOAD_RETENTION_DAYS``)."""
    return uploads_clean()
