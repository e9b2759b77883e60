"""The rollout budgets, declared once: each with its default, range, form label and help.

A rollout stops at the first budget it reaches (:func:`agent.rollout.run_rollouts`). The settings made of them:

- a training run's ``rollout`` section (:class:`trainer.config.RolloutConfig` is a :class:`RolloutBudgets`);
- a warm start's top-level budgets (:class:`trainer.warm_start.WarmStartConfig` is one too: the demonstrations
  keep to the budgets of the runs they prepare);
- an evaluation's rollout settings (:class:`RolloutOverrides`, ``EvaluationSpec.rollout``): a budget left unset
  keeps the method's paper setting (:data:`agent.rollout.PAPER_CONFIGS`).

Forms take each field's type, initial value, range, label and help from here (``webapp.common.config_form``), so a
new budget is added in this file and nowhere else. Ranges are checked by :meth:`RolloutBudgets.check` and
:meth:`RolloutOverrides.check`, which raise :class:`BudgetError` naming the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The field names of agent.rollout.RolloutConfig where they differ from the budget's (what an evaluation stores).
ROLLOUT_NAMES = {"max_turn_tokens": "max_new_tokens"}


class BudgetError(ValueError):
    """A budget out of its range, unknown or of the wrong type; ``field`` names it, ``message`` says why."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


def budget(default: int, *, low: int, high: int | None = None, label: str, help: str) -> Any:
    """A budget field: its default, its range [``low``, ``high``] (``high`` None: no upper bound), label and help
    (the metadata ``trainer.config`` and the forms read)."""
    return field(default=default, metadata={"help": help, "label": label, "low": low, "high": high})


@dataclass
class RolloutBudgets:
    max_turns: int = budget(
        3,
        low=0,
        high=50,
        label="turn budget",
        help="Turn budget: search turns before the final answer (Search-R1, AutoSearch), HiPRAG's step budget B, "
        "Search-P1's action budget B, TIRESRAG's retrieval rounds.",
    )
    max_turn_tokens: int = budget(
        64, low=1, label="tokens per turn", help="New tokens per model turn; a turn is cut there."
    )
    max_rollout_tokens: int = budget(
        0,
        low=0,
        label="tokens per rollout",
        help="Completion tokens per rollout, the model's and retrieved (what the update trains on); a turn gets at "
        "most what is left and a rollout with nothing left ends ('budget:rollout_tokens'). 0: no budget of its "
        "own (a training run: training.max_completion_length).",
    )
    max_obs_tokens: int = budget(
        100,
        low=1,
        label="retrieved tokens per search",
        help="Tokens of retrieved text per search (the observation is cut there).",
    )
    topk: int = budget(3, low=1, high=50, label="passages per search", help="Passages per search.")

    def check(self) -> None:
        """Every budget within its range, else :class:`BudgetError` naming the first that is not."""
        for name in BUDGET_NAMES:
            check_budget(name, getattr(self, name))

    def rollout_values(self) -> dict[str, int]:
        """The budgets under :class:`agent.rollout.RolloutConfig`'s names (``max_turn_tokens`` →
        ``max_new_tokens``)."""
        return {ROLLOUT_NAMES.get(name, name): getattr(self, name) for name in BUDGET_NAMES}


BUDGET_NAMES = tuple(f.name for f in dataclasses.fields(RolloutBudgets))
_DECLARED = {f.name: f for f in dataclasses.fields(RolloutBudgets)}


def budget_field(name: str) -> dataclasses.Field[Any]:
    """The declaration of the budget ``name`` (its default, and its range, label and help in ``metadata``);
    :class:`KeyError` for a name that is no budget."""
    return _DECLARED[name]


def check_budget(name: str, value: int, *, field_name: str = "") -> None:
    """``value`` within the range of the budget ``name``; the error names ``field_name`` (default: ``name``)."""
    meta = _DECLARED[name].metadata
    low, high = meta["low"], meta["high"]
    if value < low:
        raise BudgetError(field_name or name, f"must be ≥ {low}, got {value!r}")
    if high is not None and value > high:
        raise BudgetError(field_name or name, f"must be ≤ {high}, got {value!r}")


# The budgets by their agent.rollout.RolloutConfig name: RolloutOverrides' fields, the evaluation form's and command's.
BUDGET_BY_ROLLOUT_NAME = {ROLLOUT_NAMES.get(name, name): name for name in BUDGET_NAMES}


@dataclass(frozen=True, slots=True)
class RolloutOverrides:
    """An evaluation's rollout settings under :class:`agent.rollout.RolloutConfig`'s names: the budgets (ranges as
    declared in :class:`RolloutBudgets`), the sampling temperature and seed. ``None`` keeps the method's paper
    setting; :meth:`to_json` holds only the settings given (what ``EvaluationSpec.rollout`` has always stored)."""

    topk: int | None = None
    max_turns: int | None = None
    max_new_tokens: int | None = None
    max_rollout_tokens: int | None = None
    max_obs_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None

    @classmethod
    def from_json(cls, values: Mapping[str, Any] | None) -> RolloutOverrides:
        """From stored or posted values; an unknown key or a value of the wrong type is a :class:`BudgetError`."""
        values = dict(values or {})
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise BudgetError("rollout", f"unknown setting(s) {', '.join(unknown)}")
        for name, value in values.items():
            if value is None:
                continue
            if name == "temperature":
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise BudgetError(name, f"must be a number, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int):
                raise BudgetError(name, f"must be an integer, got {value!r}")
        return cls(**values)

    @classmethod
    def of(cls, budgets: RolloutBudgets, **more: Any) -> RolloutOverrides:
        """A training run's budgets (and ``more``: temperature, seed) as an evaluation's settings."""
        return cls.from_json({**budgets.rollout_values(), **more})

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) is not None
        }

    def check(self) -> None:
        """Each budget given within its declared range, the temperature ≥ 0 (:class:`BudgetError` names it)."""
        for name, value in self.to_json().items():
            if name in BUDGET_BY_ROLLOUT_NAME:
                check_budget(BUDGET_BY_ROLLOUT_NAME[name], value, field_name=name)
            elif name == "temperature" and value < 0:
                raise BudgetError(name, f"must be ≥ 0, got {value!r}")

    def apply(self, config: Any) -> Any:
        """``config`` (an :class:`agent.rollout.RolloutConfig`) with the settings given."""
        return dataclasses.replace(config, **self.to_json())
