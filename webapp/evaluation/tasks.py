from celery import shared_task

from webapp.evaluation.services import evaluation_run_execute


@shared_task
def evaluation_run_task(run_id: int) -> None:
    """Queue ``default`` (the routes send only ``judge_*`` tasks to the judge queue)."""
    evaluation_run_execute(run_id=run_id)


@shared_task
def judge_rejudge_task(job_id: int) -> None:
    """Queue ``judge`` (its name starts with ``judge_``): a stored run judged again (webapp.evaluation.rejudge)."""
    from webapp.evaluation.rejudge import rejudge_execute

    rejudge_execute(job_id=job_id)
