"""What the apps above ``runs`` add to its pages, registered in their ``AppConfig.ready()``.

``runs`` is the base of the run apps: trajectories, training, evaluation and the rest import it, and it imports
none of them (``tests/test_layers.py``). Its pages reach their parts through three tables:

- **supervisors** by run kind: ``training`` registers how a train or warm-start run is checked for a crashed
  supervisor and stopped (the run page's status and Stop button);
- **run page parts**: a name in the run page's context and how to read it for a run (``trajectories``: the newest
  trajectories; the run page's polled trajectories fragment reads the same part);
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
    did; ``stop(run_id=...)`` asks the supervisor to stop the run and returns it.
    """

    mark_crashed: Callable[..., Any]
    stop: Callable[..., Run]


_supervisors: dict[str, Supervisor] = {}
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
