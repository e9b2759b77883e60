"""Reads for the demo: the warm model that `manage.py demo` is preparing, for the forms' notice."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from webapp.runs.models import Run


@dataclass(frozen=True, slots=True)
class WarmModelPreparing:
    run_id: int
    status: str
    where: str  # "step 12 of 42: training (supervised warm start), about 9 min left", or "waiting to start"
    path: str  # the model folder it writes


def demo_warm_start_active() -> Run | None:
    """The demo's warm-start run still queued or running (the newest), if any."""
    return (
        Run.objects.filter(
            kind=Run.Kind.WARM_START, status__in=Run.ACTIVE_STATUSES, config__demo_recipe__gt=0
        )
        .order_by("-pk")
        .first()
    )


def warm_model_preparing() -> WarmModelPreparing | None:
    """Where the demo's warm start stands, while it is queued or running; ``None`` otherwise."""
    from webapp.runs.progress_view import progress_view

    run = demo_warm_start_active()
    if run is None:
        return None
    view = progress_view(run.progress)
    if view is None:
        where = "waiting for the train worker" if run.status == Run.Status.PENDING else "starting"
    else:
        where = (f"step {view.step} of {view.max_steps}: " if view.max_steps else "") + view.phase
        where += f", {view.eta}" if view.eta else ""
    return WarmModelPreparing(
        run_id=run.pk, status=run.status, where=where, path=str(run.config.get("output_dir", ""))
    )


def warm_model_refusal(path: str | Path) -> str | None:
    """Why a run of ``path`` cannot start yet when it is the warm model the demo is preparing, else ``None``."""
    preparing = warm_model_preparing()
    if preparing is None or Path(preparing.path).resolve() != Path(path).resolve():
        return None
    return (
        f"the warm-started model is still being prepared by warm start #{preparing.run_id} ({preparing.where}): "
        "start this run when it has finished (its folder holds no model before)."
    )
