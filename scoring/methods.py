"""The one table of reward methods (:data:`METHODS`): each method's trajectory format, its weights, the judge
outcomes its reward reads, the reward adapter that reads them, the judge outcomes a bench simulates, and whether chat
trajectories are scored. :mod:`scoring.scorer` scores with it; every other table keyed by method name covers exactly
its keys (tests/test_method_tables.py). A new method is one entry here, its params dataclass and its reward.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Generic, TypeVar

from scoring.errors import BatchAverageRequired, ScoringInputError
from scoring.params import (
    AutosearchParams,
    HipragParams,
    JudgementInputs,
    SearchP1Params,
    SearchR1Params,
    TiresragParams,
    parse_params,
)
from scoring.rewards.autosearch import autosearch_reward
from scoring.rewards.hiprag import hiprag_reward
from scoring.rewards.result import Reward
from scoring.rewards.searchp1 import MAX_STEP_COUNT, SearchP1Evaluation, searchp1_reward
from scoring.rewards.searchr1 import searchr1_format_reward, searchr1_outcome_reward
from scoring.rewards.tiresrag import TiresragWeights, tiresrag_reward
from scoring.trajectory import Trajectory
from scoring.verdicts import Verdict

__all__ = ["METHODS", "Method"]


# Each reward reads its weights from its method's params dataclass (scoring.params: defaults, ranges and the paper's
# equations declared there) and its judge outcomes from ``judgements``.


def _search_r1(
    trajectory: Trajectory, golds: Sequence[str], params: SearchR1Params, judged: JudgementInputs
) -> Reward:
    if params.reward == "outcome":
        return searchr1_outcome_reward(trajectory, golds)
    return searchr1_format_reward(
        trajectory,
        golds,
        structure_format_score=params.structure_format_score,
        final_format_score=params.final_format_score,
        retrieval_score=params.retrieval_score,
    )


def _hiprag(
    trajectory: Trajectory, golds: Sequence[str], params: HipragParams, judged: JudgementInputs
) -> Reward:
    flags = judged.verdicts("step_flags")
    if len(flags) > len(trajectory.steps):
        raise ScoringInputError(
            judged.field("step_flags"), f"{len(flags)} verdicts for {len(trajectory.steps)} steps"
        )
    try:
        return hiprag_reward(
            trajectory,
            golds,
            flags,
            lambda_f=params.lambda_f,
            lambda_p=params.lambda_p,
            process=params.process,
            batch_average_bonus=params.batch_average_bonus,
        )
    except BatchAverageRequired as exc:  # HiPRAG Sec. 5.3: only the batch knows its average bonus
        raise BatchAverageRequired("params.batch_average_bonus", exc.message) from None
    except ScoringInputError as exc:
        fields = {"step_flags": judged.field("step_flags"), "process": "params.process"}
        raise ScoringInputError(fields.get(exc.field, exc.field), exc.message) from None


def _autosearch(
    trajectory: Trajectory, golds: Sequence[str], params: AutosearchParams, judged: JudgementInputs
) -> Reward:
    answers = judged.values.get("intermediate_answers", [])
    if not isinstance(answers, list) or not all(a is None or isinstance(a, str) for a in answers):
        raise ScoringInputError(judged.field("intermediate_answers"), "must be a list of strings (or null)")
    try:
        return autosearch_reward(trajectory, golds, answers)
    except ScoringInputError:
        raise
    except ValueError as exc:  # the count does not match the trajectory's retrieval steps
        raise ScoringInputError(judged.field("intermediate_answers"), str(exc)) from None


def _search_p1(
    trajectory: Trajectory, golds: Sequence[str], params: SearchP1Params, judged: JudgementInputs
) -> Reward:
    raw = judged.values.get("evaluation")
    evaluation = None
    if raw is not None:
        if not isinstance(raw, Mapping):
            raise ScoringInputError(judged.field("evaluation"), "must be an object of the evaluator's fields")
        try:
            evaluation = SearchP1Evaluation(**raw)
        except (TypeError, ValueError) as exc:
            raise ScoringInputError(judged.field("evaluation"), str(exc)) from None
    return searchp1_reward(
        trajectory,
        golds,
        evaluation,
        n_ref_steps=judged.integer("n_ref_steps", None, 0, MAX_STEP_COUNT),
        variant=params.variant,
        weights=params.weights(),
    )


def _tiresrag(
    trajectory: Trajectory, golds: Sequence[str], params: TiresragParams, judged: JudgementInputs
) -> Reward:
    thinking_raw = judged.values.get("thinking")
    thinking: float | Verdict | None
    if isinstance(thinking_raw, int | float) and not isinstance(thinking_raw, bool):
        thinking = judged.number("thinking", 0.0, 0.0, 1.0)
    else:
        thinking = judged.verdict("thinking")
    return tiresrag_reward(
        trajectory,
        golds,
        sufficiency=judged.verdict("sufficiency"),
        thinking=thinking,
        step=params.step,
        total_steps=params.total_steps,
        weights=TiresragWeights(
            thinking=params.w_thinking, sufficiency=params.w_sufficiency, reflection=params.w_reflection
        ),
    )


# Judge outcomes a judge could have given, for the benches (scoring.bench): each builds the method's ``judgements``
# from the trajectory, its golds and one drawn verdict per generated step (``flags``). Scoring never calls a judge.


def _search_r1_simulated(
    trajectory: Trajectory, golds: Sequence[str], flags: Sequence[bool]
) -> dict[str, Any]:
    return {}


def _hiprag_simulated(trajectory: Trajectory, golds: Sequence[str], flags: Sequence[bool]) -> dict[str, Any]:
    steps = len(trajectory.steps)  # one verdict per parsed step: a malformed text may parse to fewer or more
    return {"step_flags": [bool(flags[i]) if i < len(flags) else False for i in range(steps)]}


def _autosearch_simulated(
    trajectory: Trajectory, golds: Sequence[str], flags: Sequence[bool]
) -> dict[str, Any]:
    # one self-answer per retrieval step: the gold from the second step on, so t_c varies
    return {
        "intermediate_answers": [
            golds[0] if i else "unknown" for i in range(max(len(trajectory.steps) - 1, 0))
        ]
    }


def _search_p1_simulated(
    trajectory: Trajectory, golds: Sequence[str], flags: Sequence[bool]
) -> dict[str, Any]:
    plan = max(len(trajectory.plan), 1)
    evaluation = SearchP1Evaluation(0.8, plan, min(plan, trajectory.n_searches), 1, 0.5, 0.5)
    return {"evaluation": asdict(evaluation), "n_ref_steps": 2}


def _tiresrag_simulated(
    trajectory: Trajectory, golds: Sequence[str], flags: Sequence[bool]
) -> dict[str, Any]:
    return {"sufficiency": bool(flags[0]) if flags else False, "thinking": 0.7}


P = TypeVar("P")
Judgements = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Method(Generic[P]):
    """A reward method: its trajectory format, its weights (a :mod:`scoring.params` dataclass), the judge outcomes
    its reward reads, the reward, the judge outcomes a bench simulates, and whether chat trajectories are scored.

    ``chat_refusal`` is None for a method :mod:`scoring.chat_scoring` scores on chat trajectories (its reward reads
    only steps, contexts and the final answer), else why the method does not apply to them."""

    format: str
    params_type: type[P]
    judgements: tuple[str, ...]
    reward: Callable[[Trajectory, Sequence[str], P, JudgementInputs], Reward]
    simulated_judgements: Callable[[Trajectory, Sequence[str], Sequence[bool]], Judgements]
    chat_refusal: str | None

    @property
    def params(self) -> tuple[str, ...]:
        """The names of the method's weights, in declaration order."""
        return tuple(f.name for f in fields(self.params_type))  # type: ignore[arg-type]

    def read_params(self, values: Mapping[str, Any] | None) -> P:
        return parse_params(self.params_type, values)


# The one table of reward methods: every other table keyed by method name covers exactly these keys
# (tests/test_method_tables.py).
METHODS: dict[str, Method[Any]] = {
    "search_r1": Method("search_r1", SearchR1Params, (), _search_r1, _search_r1_simulated, chat_refusal=None),
    "hiprag": Method("hiprag", HipragParams, ("step_flags",), _hiprag, _hiprag_simulated, chat_refusal=None),
    "autosearch": Method(
        "autosearch",
        AutosearchParams,
        ("intermediate_answers",),
        _autosearch,
        _autosearch_simulated,
        chat_refusal="AutoSearch's Eq. 1 format reward checks each turn's own tags (<think>, <search>, <answer>) "
        "and its repeated-search rule in the turn's text, and its self-answers are generated after each <search> "
        "turn of its prompt; a chat trajectory has tool calls instead of those turns",
    ),
    "search_p1": Method(
        "search_p1",
        SearchP1Params,
        ("evaluation", "n_ref_steps"),
        _search_p1,
        _search_p1_simulated,
        chat_refusal="Search-P1's path-centric reward scores the agent's own plan (its <plan> steps) against the "
        "reference plan; a chat trajectory has no explicit plan to score",
    ),
    "tiresrag": Method(
        "tiresrag",
        TiresragParams,
        ("sufficiency", "thinking"),
        _tiresrag,
        _tiresrag_simulated,
        chat_refusal=None,
    ),
}
