from celery import shared_task

from webapp.corpora.services import index_build, index_mark_crashed


# Routed to the "retrieval" queue (settings.CELERY_TASK_ROUTES: webapp.corpora.tasks.index_*).
@shared_task
def index_build_task(index_id: int) -> None:
    index_build(index_id=index_id)


# On the default queue (not retrieval: a busy index worker would run it only after its build). Celery beat sends it.
@shared_task
def check_crashed_indexes_task() -> None:
    index_mark_crashed()
