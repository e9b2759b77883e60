"""Score chat trajectories (``scoring.formats.chat``) with the methods whose step semantics apply to them.

A chat trajectory gives the same :class:`~scoring.trajectory.Trajectory` as the tag formats: search steps (tool calls
to a search tool, with their query and retrieved context), non-search steps (assistant text answered from what the
agent knows) and a final answer. The rewards that read only those are computed by the method's own paper-mode
reward, on the parsed chat trajectory, with the same ``params`` and ``judgements`` as :func:`scoring.scorer.score`:

* ``search_r1``: the paper's outcome reward (EM of the final answer) and v0.3's outcome + format reward, where
  "follows the format" is the chat trajectory's validity (every call answered, arguments JSON objects with a query,
  the list ending with the assistant's answer) and the retrieval hit scans the tool results of search calls;
* ``hiprag``: Eq. 1 with A = cover EM of the final answer, F = the chat trajectory's validity, and one detector
  verdict per step (over-search on each search call, under-search on each assistant text step, the final one too);
* ``tiresrag``: Eq. 5: the answer's F1, the sufficiency and thinking judges (trajectory-level verdicts) and the
  reflection reward over the first and last ``<answer>`` of the conversation.

The others are refused with :class:`ScoringInputError` (field ``method``) saying why: a method declares which in its
:class:`scoring.scorer.Method` entry (``chat_refusal``; :data:`NOT_APPLICABLE` lists the refused ones).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scoring.errors import BatchAverageRequired, ScoringInputError
from scoring.formats.chat import FORMAT_NAME, MALFORMED_KEY
from scoring.rewards.hiprag import average_earned_bonus
from scoring.scorer import METHODS, Scored, check_golds, reward_of
from scoring.trajectory import Trajectory
from scoring.verdicts import MissingVerdict

# The methods refused on chat trajectories, with why (each Method's ``chat_refusal``; the others are scored).
NOT_APPLICABLE: dict[str, str] = {
    name: spec.chat_refusal for name, spec in METHODS.items() if spec.chat_refusal is not None
}


def score_chat(
    method: str,
    trajectory: Trajectory,
    golds: Sequence[str],
    *,
    params: Mapping[str, Any] | None = None,
    judgements: Mapping[str, Any] | None = None,
) -> Scored:
    """The paper-mode reward of ``method`` for a parsed chat trajectory (:func:`scoring.formats.chat.parse_chat`).

    Raises :class:`ScoringInputError` for a method that does not apply (field ``method``), a malformed message log
    (field ``messages``, or the named ``messages[i]…`` field), bad golds, params or judgements; and
    :class:`MissingVerdict` when a judge outcome the reward needs is missing, as :func:`scoring.scorer.score` does.
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ScoringInputError("method", f"unknown method {method!r}; known: {', '.join(METHODS)}")
    spec = METHODS[method]
    if spec.chat_refusal is not None:
        raise ScoringInputError(
            "method", f"{method} does not apply to chat trajectories: {spec.chat_refusal}"
        )
    if trajectory.format != FORMAT_NAME:
        raise ScoringInputError("trajectory", f"expected a chat trajectory, got format {trajectory.format!r}")
    malformed = trajectory.extras.get(MALFORMED_KEY)
    if malformed is not None:
        reason = trajectory.error.reason if trajectory.error else malformed
        raise ScoringInputError(malformed, reason.removeprefix(f"{malformed}: "))
    check_golds(golds)
    return reward_of(method, trajectory, golds, spec.read_params(params), judgements)


def score_chat_batch(
    method: str,
    items: Sequence[tuple[Trajectory, Sequence[str], Mapping[str, Any] | None]],
    *,
    params: Mapping[str, Any] | None = None,
) -> list[Scored | ScoringInputError | MissingVerdict]:
    """:func:`score_chat` over a batch of (trajectory, golds, judgements), as :func:`scoring.scorer.score_batch`:
    HiPRAG's Sec. 5.3 ablations give a trajectory without a step of the evaluated type the batch's average bonus."""

    def one(
        item: tuple[Trajectory, Sequence[str], Mapping[str, Any] | None], given: Mapping[str, Any] | None
    ) -> Any:
        try:
            return score_chat(method, item[0], item[1], params=given, judgements=item[2])
        except (ScoringInputError, MissingVerdict) as exc:
            return exc

    results: list[Scored | ScoringInputError | MissingVerdict] = [one(item, params) for item in items]
    pending = [i for i, r in enumerate(results) if isinstance(r, BatchAverageRequired)]
    if pending:
        average = average_earned_bonus(r.reward for r in results if isinstance(r, Scored))
        filled = {**dict(params or {}), "batch_average_bonus": average}
        for i in pending:
            results[i] = one(items[i], filled)
    return results
