"""What a pending supervised run waits for: the train or warm-start runs its train worker runs first.

Train and warm-start runs (``Run.SUPERVISED_KINDS``) go to the ``train`` queue (``settings.CELERY_TASK_ROUTES``),
whose worker takes one at a time (``make demo`` starts one such worker, busy with the demo's warm start for half an
hour). A pending run waits behind the running ones and behind the pending ones queued before it; their own
heartbeats (``Run.progress``, :mod:`webapp.runs.progress_view`) say how far along they are.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from django.utils import timezone

from webapp.runs.models import Run
from webapp.runs.progress_view import duration, progress_view

NAMED_AHEAD = 3  # the pending runs ahead named in the message; more are counted only
# An idle train worker takes a run within a second or two; only a run left waiting longer than this, with nothing
# running, suggests that no worker listens on the queue (the page then asks whether one runs).
WORKER_GRACE_S = 30.0


@dataclass(frozen=True, slots=True)
class RunAhead:
    """A run the train worker takes before the waiting one, with how far along it is (running runs)."""

    pk: int
    name: str
    kind: str  # "train", "warm start"
    where: str = ""  # a running run's "step 12 of 42", or its phase before the first step
    eta: str = ""  # "about 9 min left", once a step has finished

    @property
    def label(self) -> str:
        return f"run #{self.pk} {self.name} ({self.kind})"

    @property
    def progress(self) -> str:
        return ", ".join(part for part in (self.where, self.eta) if part)


@dataclass(frozen=True, slots=True)
class QueueWait:
    running: tuple[RunAhead, ...]  # what the train worker runs now, oldest first
    pending_ahead: tuple[RunAhead, ...]  # queued before this run, oldest first
    waited_s: float  # seconds since the run was queued

    @property
    def waited(self) -> str:
        """``waited_s`` as the page says it: "35 min"."""
        return duration(self.waited_s)

    @property
    def no_worker_suspected(self) -> bool:
        """Nothing runs and the run has waited past the grace a free worker needs to take it."""
        return not self.running and self.waited_s >= WORKER_GRACE_S

    @property
    def message(self) -> str:
        """The run page's sentence: "Queued behind run #3 warm (warm start), step 12 of 42, about 9 min left", or
        "Waiting for a train worker: none has taken it for 35 min" when nothing runs."""
        ahead = _pending_phrase(self.pending_ahead)
        if not self.running and not self.no_worker_suspected:
            text = "Queued for a train worker"
            return f"{text}, after the {ahead} queued before it" if ahead else text
        if not self.running:
            text = f"Waiting for a train worker: none has taken it for {self.waited}"
            return f"{text}, nor the {ahead} queued before it" if ahead else text
        behind = "; and ".join(_with_progress(run) for run in self.running)
        text = f"Queued behind {behind}"
        return f"{text}; then {ahead} queued before it" if ahead else text

    @property
    def short(self) -> str:
        """The runs list's line under the status: "behind #3 (warm start) · about 9 min left"."""
        if not self.running:
            return f"no train worker has taken it for {self.waited}" if self.no_worker_suspected else "queued"
        first = self.running[0]
        more = len(self.running) - 1 + len(self.pending_ahead)
        text = f"behind #{first.pk} ({first.kind})" + (f" · {first.eta}" if first.eta else "")
        return f"{text} · {more} more ahead" if more else text


def _with_progress(run: RunAhead) -> str:
    return f"{run.label}, {run.progress}" if run.progress else run.label


def _pending_phrase(runs: tuple[RunAhead, ...]) -> str:
    """``"1 run (#5 grpo)"``, ``"4 runs (#5 a, #6 b, #7 c, …)"``, or ``""``."""
    if not runs:
        return ""
    names = ", ".join(f"#{run.pk} {run.name}" for run in runs[:NAMED_AHEAD])
    more = ", …" if len(runs) > NAMED_AHEAD else ""
    return f"{len(runs)} run{'s' if len(runs) > 1 else ''} ({names}{more})"


def _kind(run: Run) -> str:
    return str(run.kind).replace("_", " ")


def _ahead(run: Run, now: dt.datetime) -> RunAhead:
    """The run as one ahead in the queue; a running one with how far along it is, from its heartbeat: its step and
    ETA, or its phase before the first step, or when it started before its first heartbeat."""
    ahead = RunAhead(pk=run.pk, name=run.name, kind=_kind(run))
    if run.status != Run.Status.RUNNING:
        return ahead
    view = progress_view(run.progress, now=now.timestamp())
    if view is None:
        since = f"started {duration((now - run.started_at).total_seconds())} ago" if run.started_at else ""
        return RunAhead(ahead.pk, ahead.name, ahead.kind, where=since or "starting")
    where = f"step {view.step} of {view.max_steps}" if view.max_steps else view.phase
    return RunAhead(ahead.pk, ahead.name, ahead.kind, where=where, eta=view.eta)


def _waits(run: Run) -> bool:
    return run.status == Run.Status.PENDING and run.kind in Run.SUPERVISED_KINDS


def queue_waits(*, runs: Iterable[Run], now: dt.datetime | None = None) -> dict[int, QueueWait]:
    """For each pending train or warm-start run of ``runs``, what it waits for; one query over the active
    supervised runs (none when no run of ``runs`` is waiting)."""
    waiting = [run for run in runs if _waits(run)]
    if not waiting:
        return {}
    now = now or timezone.now()
    active = list(
        Run.objects.filter(kind__in=Run.SUPERVISED_KINDS, status__in=Run.ACTIVE_STATUSES)
        .only("id", "name", "kind", "status", "progress", "created_at", "started_at")
        .order_by("created_at", "id")
    )
    running = tuple(_ahead(other, now) for other in active if other.status == Run.Status.RUNNING)
    found = {}
    for run in waiting:
        queued_before = (
            other
            for other in active
            if other.status == Run.Status.PENDING and (other.created_at, other.pk) < (run.created_at, run.pk)
        )
        found[run.pk] = QueueWait(
            running=running,
            pending_ahead=tuple(_ahead(other, now) for other in queued_before),
            waited_s=(now - run.created_at).total_seconds(),
        )
    return found


def queue_wait(*, run: Run, now: dt.datetime | None = None) -> QueueWait | None:
    """What a pending train or warm-start run waits for; ``None`` for any other run (no query)."""
    return queue_waits(runs=[run], now=now).get(run.pk)
