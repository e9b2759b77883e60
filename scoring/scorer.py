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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Generic, TypeVar

from scoring.errors import BatchAverageRequired, ScoringInputError
from scoring.formats import PARSERS, parse
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
from scoring.rewards.hiprag import average_earned_bonus, hiprag_reward
from scoring.rewards.result import Reward
from scoring.rewards.searchp1 import MAX_STEP_COUNT, SearchP1Evaluation, searchp1_reward
from scoring.rewards.searchr1 import searchr1_format_reward, searchr1_outcome_reward
from scoring.rewards.tiresrag import TiresragWeights, tiresrag_reward
from scoring.trajectory import Trajectory
from scoring.verdicts import MissingVerdict, Verdict

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
