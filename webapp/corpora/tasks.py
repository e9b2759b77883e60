from celery import shared_task

from webapp.corpora.services import index_build


# Routed to the "retrieval" queue (settings.CELERY_TASK_ROUTES: webapp.corpora.tasks.index_*).
@shared_task
def index_build_task(index_id: int) -> None:
    index_build(index_id=index_id)
