"""What the apps above ``runs`` add to its pages, registered in their ``AppConfig.ready()``.

``runs`` is the base of the run apps: trajectories, training, evaluation and the rest import it, and it imports
none of them, in code or in templates (``tests/test_layers.py``). Its pages reach their parts through four tables:

- **supervisors** by run kind: ``training`` registers how a train or warm-start run is checked for a crashed
  supervisor and stopped, and its part of the status fragment (quiet, stopping, Stop, revoke ingest tokens);
- **run page parts**: a name in the run page's context and how to read it for a run (``trajectories``: the newest
  trajectories; the run page's polled trajectories fragment reads the same part);
- **run page panels**: templates the run page includes in their order, each for the runs it applies to, as
  sections (``evaluation``: an evaluation run's report; ``audits``: judge drift from the run's audits) or among
  the run's facts (``training``: where its trainer runs, a Ray job's id);
- **summary rows**: pooled report rows of runs without metric points (``evaluation``: an evaluation run's report),
  which give the runs list its numbers for such runs.

A registration under a name already taken replaces it, so a second ``ready()`` changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webapp.runs.models import Run


@dataclass(frozen=True)
class Supervisor:
    """How runs of some kinds are supervised.

    ``mark_crashed(run_id=...)`` marks the run crashed when its supervisor stopped beating, and is truthy when it
    did; ``stop(run_id=...)`` asks the supervisor to stop the run and returns it; ``status_template`` is the run
    status fragment's part for such a run (its Stop button included), rendered with the fragment's context.
    """

    mark_crashed: Callable[..., Any]
    stop: Callable[..., Run]
    status_template: str


@dataclass(frozen=True)
class Panel:
    """A part of the run page: ``template`` is rendered with the page's context where ``shows(run)``."""

    template: str
    order: int  # panels stand in this order, lowest first
    shows: Callable[[Run], bool]
    place: str  # "sections" (below the curves) or "facts" (items of the facts list: <dt> and <dd>)


_supervisors: dict[str, Supervisor] = {}
_panels: dict[str, Panel] = {}
_run_parts: dict[str, Callable[[Run], Any]] = {}
_summary_rows: dict[str, Callable[[Sequence[int]], Mapping[int, Mapping[str, Any]]]] = {}


def supervisor_register(*, kinds: Iterable[str], supervisor: Supervisor) -> None:
    for kind in kinds:
        _supervisors[kind] = supervisor


def supervisor_for(kind: str) -> Supervisor | None:
    """The supervisor of runs of ``kind``; ``None`` for a kind that runs without one (an evaluation, an import)."""
    return _supervisors.get(kind)


def run_part_register(name: str, read: Callable[[Run], Any]) -> None:
    _run_parts[name] = read


def run_parts(run: Run, names: Iterable[str] | None = None) -> dict[str, Any]:
    """``{name: read(run)}`` for the registered run page parts (all of them, or those in ``names``)."""
    wanted = _run_parts if names is None else {name: _run_parts[name] for name in names}
    return {name: read(run) for name, read in wanted.items()}


PLACES = ("sections", "facts")


def run_panel_register(
    name: str,
    *,
    template: str,
    order: int,
    shows: Callable[[Run], bool] = lambda run: True,
    place: str = "sections",
) -> None:
    if place not in PLACES:
        raise ValueError(f"run panel {name!r}: place must be one of {', '.join(PLACES)}, got {place!r}")
    _panels[name] = Panel(template=template, order=order, shows=shows, place=place)


def run_panels(run: Run, place: str = "sections") -> list[str]:
    """The templates of the panels in ``place`` that show for ``run``, in their order."""
    panels = sorted(_panels.values(), key=lambda panel: panel.order)
    return [panel.template for panel in panels if panel.place == place and panel.shows(run)]


def summary_rows_register(
    name: str, read: Callable[[Sequence[int]], Mapping[int, Mapping[str, Any]]]
) -> None:
    _summary_rows[name] = read


def summary_rows(run_ids: Sequence[int]) -> dict[int, Mapping[str, Any]]:
    """Per run, the pooled summary row (``scoring.aggregates``' keys) a registered app holds for it."""
    rows: dict[int, Mapping[str, Any]] = {}
    for read in _summary_rows.values():
        rows.update(read(run_ids))
    return rows
