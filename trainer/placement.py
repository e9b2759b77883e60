"""Where a job runs — its placement, one closed set: ``local``, ``ray`` or ``external``.

* ``local``: a subprocess of the web app's worker (the train worker, an experiment's worker).
* ``ray``: a job on the Ray cluster at ``settings.RAY_ADDRESS`` (``webapp.training.executors``); its wrapper
  (``trainer.report_client``) reports over HTTP.
* ``external``: a trainer searchlab did not start, reporting over HTTP (``POST /api/v1/runs/external/``) or replayed
  from its spool (``manage.py replay_spool``).

A run's trainer config (:class:`trainer.config.RunConfig`) keeps it under the key ``executor``, the name stored
runs, experiments and the ``TrainingProcess`` row have always used; the values are these strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

CONFIG_KEY = "executor"  # the key in a run's config, an experiment's spec and TrainingProcess


class Placement(StrEnum):
    LOCAL = "local"
    RAY = "ray"
    EXTERNAL = "external"


PLACEMENTS: tuple[str, ...] = tuple(p.value for p in Placement)
# The placements searchlab starts a job in (an external run is made by its own trainer, never chosen on a form).
STARTABLE: tuple[str, ...] = (Placement.LOCAL.value, Placement.RAY.value)
HELP: dict[Placement, str] = {
    Placement.LOCAL: "a subprocess of the worker",
    Placement.RAY: "a job on the Ray cluster",
    Placement.EXTERNAL: "a trainer outside searchlab, reporting over HTTP or replayed from its spool",
}
PLACEMENT_HELP = "Where the job runs: " + "; ".join(f"{p.value}: {text}" for p, text in HELP.items()) + "."


def placement_of(config: Mapping[str, Any] | None) -> Placement:
    """The placement a stored config or spec names (one without the key runs locally, as before the key existed);
    ValueError names the key on a value outside the set."""
    value = (config or {}).get(CONFIG_KEY) or Placement.LOCAL.value
    try:
        return Placement(value)
    except ValueError:
        raise ValueError(f"{CONFIG_KEY}: must be one of {', '.join(PLACEMENTS)}, got {value!r}") from None
