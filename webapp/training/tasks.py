from celery import shared_task

from webapp.training.services import training_mark_crashed
from webapp.training.supervisor import supervise


# Routed to the "train" queue (settings.CELERY_TASK_ROUTES). Not retried: a second trainer must never start.
@shared_task(acks_late=False)
def training_supervise_task(run_id: int) -> None:
    supervise(run_id)


# Not on the train queue: a busy train worker would run it only after its training ends.
@shared_task
def check_crashed_runs_task() -> None:
    from webapp.training.executors import reconcile

    reconcile()  # Ray runs whose supervisor died: their end comes from Ray, not from the heartbeat timeout
    training_mark_crashed()
