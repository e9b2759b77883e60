import contextlib

from celery import shared_task

from webapp.experiments.processes import ExperimentBusy
from webapp.experiments.services import experiment_execute


# On the train queue (settings.CELERY_TASK_ROUTES): it supervises training subprocesses one after another. Not retried: a second execution of a
# live experiment is refused (ExperimentBusy), a failed one is resumed by the user.
@shared_task(acks_late=False)
def experiment_run_task(experiment_id: int) -> None:
    with contextlib.suppress(ExperimentBusy):
        experiment_execute(experiment_id=experiment_id)
