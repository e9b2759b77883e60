"""An experiment of the web app executed by the stage runner (``python -m trainer.jobs experiment``): launched
where the spec says (:mod:`webapp.experiments.runner_placement`), and followed from the worker's task — every few
seconds its spool is replayed into the experiment (:func:`webapp.experiments.spool_replay.experiment_spool_follow`:
each stage finished since, the trainers' curves as they grow, the result after each evaluation) and its new log lines
join the experiment's log. When the runner ends, the spool's manifest says finished or failed, and why.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from webapp.common.importing import DataImportError
from webapp.experiments.models import Experiment
from webapp.experiments.processes import Say, experiment_finish, experiment_log
from webapp.experiments.runner_launch import RunnerLaunch
from webapp.experiments.runner_placement import Runner
from webapp.experiments.spool_replay import ExperimentReplay, experiment_spool_follow
from webapp.experiments.stage_links import experiment_store_result

logger = logging.getLogger(__name__)
LOG_TAIL = 5  # lines of runner.log that explain a runner that ended without its manifest's reason


@dataclass
class Follower:
    """What has been read of a runner's spool so far."""

    experiment_id: int
    launch: RunnerLaunch
    say: Say | None = None
    log_lines: int = 0

    def sync(self) -> ExperimentReplay:
        """The spool replayed into the experiment; the log's new lines added to the experiment's log."""
        replay = experiment_spool_follow(self.experiment_id, self.launch.out)
        log = self.launch.out / "log.txt"
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.is_file() else []
        for line in lines[self.log_lines :]:
            experiment_log(self.experiment_id, line, self.say)
        self.log_lines = len(lines)
        # heard from: the runner is followed even while it writes nothing new
        Experiment.objects.filter(pk=self.experiment_id).update(heartbeat_at=timezone.now())
        return replay


def runner_follow(
    experiment_id: int, launch: RunnerLaunch, runner: Runner, say: Say | None = None
) -> Experiment:
    """Follow the runner to its end (see the module's doc); an interruption stops it and propagates."""
    follower = Follower(experiment_id, launch, say)
    poll = float(getattr(settings, "EXPERIMENT_POLL_SECONDS", 2.0))
    try:
        while True:
            code = runner.poll()
            try:
                follower.sync()
            except DataImportError as exc:  # a file being written, read again next time; at the end it counts
                if code is not None:
                    raise
                logger.info("experiment %s: spool not readable yet: %s", experiment_id, exc)
            if code is not None:
                break
            time.sleep(poll)
    except BaseException:
        runner.stop()
        raise
    return _finish(follower, code)


def _finish(follower: Follower, code: int) -> Experiment:
    """Finished when the runner exited 0 and its manifest says finished with every stage stored; else failed with
    the runner's reason, the stages it did not finish and, without a reason, the end of its output."""
    experiment_id = follower.experiment_id
    replay = follower.sync()
    experiment_store_result(experiment_id=experiment_id)
    manifest_path = follower.launch.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    if code == 0 and manifest.get("status") == "finished" and not replay.missing:
        experiment_log(experiment_id, "finished", follower.say)
        return experiment_finish(experiment_id, Experiment.Status.FINISHED)
    reason = str(manifest.get("error") or "")
    if not reason:
        log = follower.launch.log
        tail = (
            log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-LOG_TAIL:]
            if log.is_file()
            else []
        )
        reason = f"the runner exited with {code}" + (": " + " / ".join(tail) if tail else "")
    if replay.missing:
        reason += f"; stages not finished: {', '.join(replay.missing)}"
    experiment_log(experiment_id, f"failed: {reason}", follower.say)
    return experiment_finish(experiment_id, Experiment.Status.FAILED, reason)
