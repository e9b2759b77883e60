"""Which process executes an experiment: claiming it (one live executor at a time, checked by pid on its machine),
its log tail and heartbeat, and its end."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable

from django.db import transaction
from django.utils import timezone

from webapp.experiments.models import Experiment
from webapp.training.services import process_alive

logger = logging.getLogger(__name__)
LOG_TAIL_LINES = 60
Say = Callable[[str], None]


class ExperimentBusy(RuntimeError):
    """Another live process is executing the experiment."""


def experiment_log(experiment_id: int, line: str, say: Say | None = None) -> None:
    now = timezone.now()
    if say is not None:
        say(line)
    else:
        logger.info("experiment %s: %s", experiment_id, line)
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().only("log_tail").get(pk=experiment_id)
        lines = [*experiment.log_tail.splitlines(), f"{now:%H:%M:%S} {line}"][-LOG_TAIL_LINES:]
        Experiment.objects.filter(pk=experiment_id).update(log_tail="\n".join(lines), heartbeat_at=now)


@transaction.atomic
def experiment_claim(experiment_id: int) -> Experiment:
    experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
    here = socket.gethostname()
    if (
        experiment.status == Experiment.Status.RUNNING
        and experiment.pid != os.getpid()
        and (experiment.hostname != here or process_alive(experiment.pid))
    ):
        raise ExperimentBusy(
            f"experiment #{experiment_id} is being executed by process {experiment.pid} on {experiment.hostname}"
        )
    experiment.status = Experiment.Status.RUNNING
    experiment.hostname, experiment.pid, experiment.error = here, os.getpid(), ""
    experiment.started_at = experiment.started_at or timezone.now()
    experiment.heartbeat_at = timezone.now()
    experiment.finished_at = None
    experiment.save()
    return experiment


def experiment_finish(experiment_id: int, status: str, error: str = "") -> Experiment:
    Experiment.objects.filter(pk=experiment_id).update(
        status=status, error=error, finished_at=timezone.now(), pid=None
    )
    return Experiment.objects.get(pk=experiment_id)
