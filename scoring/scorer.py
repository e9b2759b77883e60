"""Score one raw trajectory with a named method: the entry point of the web API and of external reward services.

    >>> scored = score("search_r1", "<think>x</think><answer> Paris </answer>", ["Paris"])
    >>> scored.trajectory.valid, scored.reward.total
    (True, 1.0)

``params`` are the method's weights, declared once in its :mod:`scoring.params` dataclass (type, range, default;
:func:`method_params` checks them alone); ``judgements`` are the judge outcomes the method needs, given by the caller
as JSON values. Every problem with either raises :class:`ScoringInputError` naming the field (``params.lambda_f``,
``judgements.step_flags[2]``, ``judgements.step_flags: 2 verdicts for 1 steps``); a judge outcome the reward needs
but does not have raises :class:`scoring.verdicts.MissingVerdict` naming the step. Nothing is silently defaulted to
"no", and nothing raises a bare ``ValueError``.

:func:`score_batch` scores a batch with shared ``params``: each item gets its :class:`Scored` or its typed error, and
HiPRAG's Sec. 5.3 ablations (``process`` = ``over_only`` / ``under_only``) give a trajectory without a step of the
evaluated type the batch's average bonus (:func:`scoring.rewards.hiprag.average_earned_bonus`). Trainers and the
web API score rollout batches with it; ``score`` alone raises :class:`BatchAverageRequired` for such a trajectory
unless ``params.batch_average_bonus`` is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.errors import BatchAverageRequired, ScoringInputError
from scoring.formats import PARSERS, parse
from scoring.methods import METHODS, Method
from scoring.params import JudgementInputs
from scoring.rewards.hiprag import average_earned_bonus
from scoring.rewards.result import Reward
from scoring.trajectory import Trajectory
from scoring.verdicts import MissingVerdict

__all__ = [
    "METHODS",
    "BatchAverageRequired",
    "BatchItem",
    "MissingVerdict",
    "Scored",
    "ScoringError",
    "ScoringInputError",
    "check_golds",
    "method_params",
    "reward_of",
    "score",
    "score_batch",
]

ScoringError = ScoringInputError | MissingVerdict
"""What scoring one item can fail with: a caller's input (field named) or a judge outcome the reward needs."""


@dataclass(frozen=True, slots=True)
class Scored:
    trajectory: Trajectory
    reward: Reward


def method_params(method: str, params: Mapping[str, Any] | None) -> Any:
    """``params`` checked as ``method``'s weights (its :mod:`scoring.params` dataclass, defaults filled in).

    The one check of a method's weights for every front end (the new-run form, an evaluation, an API request):
    raises :class:`ScoringInputError` naming ``method`` or ``params.<field>`` exactly as :func:`score` would.
    """
    return _method(method).read_params(params)


def score(
    method: str,
    text: str,
    golds: Sequence[str],
    *,
    params: Mapping[str, Any] | None = None,
    judgements: Mapping[str, Any] | None = None,
) -> Scored:
    """Parse ``text`` in the method's format and compute its paper-mode reward."""
    spec = _method(method)
    _check_text(text)
    check_golds(golds)
    return reward_of(method, parse(spec.format, text), golds, spec.read_params(params), judgements)


def _check_text(text: Any) -> None:
    if not isinstance(text, str):
        raise ScoringInputError("response", f"must be a string, got {type(text).__name__}")


def check_golds(golds: Any) -> None:
    """``golds`` a non-empty list of strings, else :class:`ScoringInputError` naming ``golden_answers``."""
    # The shape every trainer and the web API pass (a list or tuple of strings) passes without the abstract
    # Sequence check and the generator below, which cost more than the reward of a short trajectory.
    if (type(golds) is list or type(golds) is tuple) and golds:
        for gold in golds:
            if not isinstance(gold, str):
                break
        else:
            return
    if (
        isinstance(golds, str)
        or not isinstance(golds, Sequence)
        or not golds
        or not all(isinstance(g, str) for g in golds)
    ):
        raise ScoringInputError("golden_answers", "must be a non-empty list of strings")


def reward_of(
    method: str,
    trajectory: Trajectory,
    golds: Sequence[str],
    params: Any,
    judgements: Mapping[str, Any] | None,
) -> Scored:
    """The method's reward of a parsed trajectory, with its weights already read (``Method.read_params``) and its
    judge outcomes as given: what :func:`score`, :func:`score_batch` and :mod:`scoring.chat_scoring` share."""
    return _reward_of(METHODS[method], method, trajectory, golds, params, judgements)


def _reward_of(
    spec: Method[Any],
    method: str,
    trajectory: Trajectory,
    golds: Sequence[str],
    params: Any,
    judgements: Mapping[str, Any] | None,
) -> Scored:
    judged = JudgementInputs("judgements", judgements, spec.judgements)
    try:
        reward = spec.reward(trajectory, golds, params, judged)
    except (ScoringInputError, MissingVerdict):
        raise
    except ValueError as exc:  # a reward's own check the field checks above did not anticipate: still typed
        raise ScoringInputError("input", f"{method}: {exc}") from None
    return Scored(trajectory, reward)


def _method(method: str) -> Method[Any]:
    spec = METHODS.get(method) if isinstance(method, str) else None
    if spec is None:
        raise ScoringInputError("method", f"unknown method {method!r}; known: {', '.join(METHODS)}")
    return spec


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One trajectory of a batch: its raw text, gold answers and judge outcomes (``score``'s arguments)."""

    text: str
    golds: Sequence[str]
    judgements: Mapping[str, Any] | None = None


def score_batch(
    method: str, items: Sequence[BatchItem], *, params: Mapping[str, Any] | None = None
) -> list[Scored | ScoringError]:
    """:func:`score` over a batch sharing ``params``: one :class:`Scored` or typed error per item, in order.

    HiPRAG Sec. 5.3 ("If a trajectory contains zero steps of the evaluated type, we set the process bonus to the
    average bonus within the current training batch"): with ``process`` = ``over_only`` / ``under_only`` and no
    ``params.batch_average_bonus`` given, a trajectory whose bonus is due (A = F = 1, Eq. 1's gate) but which has
    no step of the evaluated type gets :func:`~scoring.rewards.hiprag.average_earned_bonus` of the batch — the mean
    λp·N_corr/N over the items that earned a bonus of their own (0 when none did). Items whose scoring failed
    (a missing verdict) are in neither the average nor its denominator.
    """
    results, failed = _score_all(method, items, params)
    pending = [i for i in failed if isinstance(results[i], BatchAverageRequired)]
    if pending:
        average = average_earned_bonus(r.reward for r in results if isinstance(r, Scored))
        filled = {**dict(params or {}), "batch_average_bonus": average}
        rescored, _ = _score_all(method, [items[i] for i in pending], filled)
        for i, result in zip(pending, rescored, strict=True):
            results[i] = result
    return results


def _score_all(
    method: str, items: Sequence[BatchItem], params: Mapping[str, Any] | None
) -> tuple[list[Scored | ScoringError], list[int]]:
    """Each item scored as :func:`score` would, the shared weights read once for the batch; and the positions of
    the items that failed (few: the caller looks at those alone)."""
    spec = _method(method)
    results: list[Scored | ScoringError] = []
    failed: list[int] = []
    try:
        read = spec.read_params(params)
    except ScoringInputError:  # each item reports it, after its own checks, exactly as score() does
        read = None
    parser = PARSERS[spec.format]  # what parse() dispatches to, looked up once for the batch
    for item in items:
        try:
            if read is None:
                results.append(
                    score(method, item.text, item.golds, params=params, judgements=item.judgements)
                )
                continue
            _check_text(item.text)
            check_golds(item.golds)
            results.append(_reward_of(spec, method, parser(item.text), item.golds, read, item.judgements))
        except (ScoringInputError, MissingVerdict) as exc:
            failed.append(len(results))
            results.append(exc)
    return results, failed
