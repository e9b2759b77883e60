"""TIRESRAG-R1's trajectory reward as the paper defines it (§4.3, Eqs. 1–5, Appendices C.1 and K).

    R_sum = R_A + a_t · (w_t·R_T + w_s·R_S + w_r·R_R)                                      (Eq. 5)

* ``R_A`` answer reward: token F1 of the final (last) answer against the gold (Eq. 1), range [0, 1].
* ``R_S`` sufficiency reward: 1 if an LLM judge finds the reasoning trajectory (reasoning + retrieved documents, with
  the gold answer given) sufficient to derive the gold answer, else 0 (Eq. 2), values {0, 1}.
* ``R_T`` thinking reward: an LLM judge's score of the reasoning quality (Eq. 3), range [0, 1].
* ``R_R`` reflection reward: +1 when reflection turns a wrong first answer into a right second one, −1 when it turns
  a right one wrong, 0 otherwise, "right" meaning CEM = 1 (Eq. 4), values {−1, 0, +1}.
* ``a_t`` dynamic weight ``1 / (1 + exp((t − 0.9T)/10))`` (§4.3), range (0, 1); weights w_t=0.6, w_s=0.3, w_r=0.3
  (Appendix C.1). So R_sum ∈ [−0.3, 2.2].

Judge outcomes are inputs (:class:`Verdict` for sufficiency, a float or a :class:`Verdict` for the thinking score,
parsed by ``scoring.judging.tiresrag``); an unusable one raises :class:`MissingVerdict`, never reads as 0.
The group-level parts (difficulty weight Eq. 6, consistency penalty Eq. 7, group filter, shaped advantage) are in
``scoring.rewards.tiresrag_group``; the released code's pipeline, which differs (REFERENCE.md §2.7), is in
``scoring.rewards.tiresrag_reference``.

Which schedule is the paper's a_t: the main text (§4.3) writes ``(t − 0.9T)/10``, Algorithm 1 (Appendix K) writes
``(T − 0.9t)/10``. The main text is the definition: it is the only form that does what the paper says the schedule is
for ("gradually shifts focus from auxiliary reasoning rewards to answer accuracy as training proceeds", i.e. a_t must
*decrease* in t — the appendix form increases from ≈0 at t=0), and it is the form the released code uses.

Where the paper is silent, and what we chose:

* No answer at all: R_A = 0 (the paper scores "the predicted answer"; there is none). The released code instead
  scores the whole response text.
* Which CEM (Eq. 4): token cover match (every gold token occurs among the prediction's tokens), the authors' own
  CEM, with the SQuAD normalizer (:func:`scoring.metrics.token_cover_match`).
* More than two answers (the format allows one reflection, so this is a format error): a_1 is the first answer and
  a_2 the last, the one taken as the prediction. One answer or none: R_R = 0 ("otherwise").
* A malformed trajectory still gets its reward from what the parser recovered: the paper defines no format reward.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from scoring.metrics import normalize_answer, token_cover_match, token_f1
from scoring.rewards.result import Reward
from scoring.trajectory import Trajectory
from scoring.verdicts import MissingVerdict, Verdict

Golds = str | Iterable[str]
ThinkingOutcome = float | Verdict  # a parsed score in [0, 1], or why there is none

# The same golds are normalised for every rollout of a group and for every answer of a rollout: cache them.
_normalize = lru_cache(maxsize=65536)(normalize_answer)


@dataclass(frozen=True, slots=True)
class TiresragWeights:
    """Eq. 5's weights (Appendix C.1: w_t = 0.6, w_s = 0.3, w_r = 0.3)."""

    thinking: float = 0.6
    sufficiency: float = 0.3
    reflection: float = 0.3


DEFAULT_WEIGHTS = TiresragWeights()

# Training steps t and T of a_t (§4.3): no run has this many steps; a larger value is a caller's mistake, and a huge
# int would overflow the float arithmetic of a_t.
MAX_TRAINING_STEPS = 100_000_000


def answer_reward(prediction: str | None, golds: Golds) -> float:
    """R_A = F1(a, a*) (Eq. 1): FlashRAG token F1, maximised over golds; 0 without an answer.

    >>> answer_reward("the Eddie Argos band", "Eddie Argos")
    0.8
    """
    if prediction is None:
        return 0.0
    return token_f1(prediction, golds, _normalize).f1


def sufficiency_reward(verdict: Verdict | None) -> float:
    """R_S (Eq. 2): 1.0 when the judge found (Q, RD, gold) sufficient, 0.0 when not.

    >>> sufficiency_reward(Verdict.TRUE)
    1.0
    """
    if verdict is None or not verdict.usable:
        shown = "missing" if verdict is None else verdict.value
        raise MissingVerdict(f"sufficiency verdict for the trajectory is {shown}")
    return 1.0 if verdict is Verdict.TRUE else 0.0


def thinking_reward(score: ThinkingOutcome | None) -> float:
    """R_T ∈ [0, 1] (Eq. 3): the thinking judge's score, checked to be a finite number in range.

    A value outside [0, 1] is a caller's mistake (the paper-mode parser reports such replies as unparseable), so
    it raises ``ValueError`` rather than being clipped.

    >>> thinking_reward(0.7)
    0.7
    """
    if score is None or isinstance(score, Verdict):
        shown = "missing" if score is None else score.value
        raise MissingVerdict(f"thinking score for the trajectory is {shown}")
    if not 0.0 <= score <= 1.0:  # also rejects NaN
        raise ValueError(f"thinking score must be in [0, 1] (Eq. 3), got {score!r}")
    return float(score)


def reflection_reward(answers: Sequence[str], golds: Golds) -> float:
    """R_R (Eq. 4) from the first answer a_1 and the answer after reflection a_2 (the last one).

    >>> reflection_reward(["Dan Auerbach", "Eddie Argos"], "Eddie Argos")
    1.0
    >>> reflection_reward(["Eddie Argos", "Dan Auerbach"], "Eddie Argos")
    -1.0
    >>> reflection_reward(["Eddie Argos"], "Eddie Argos")
    0.0
    """
    if len(answers) < 2:
        return 0.0
    first_right = token_cover_match(answers[0], golds, _normalize)
    last_right = token_cover_match(answers[-1], golds, _normalize)
    if last_right and not first_right:
        return 1.0
    if first_right and not last_right:
        return -1.0
    return 0.0


def dynamic_weight(step: int | float, total_steps: int | float) -> float:
    """a_t = 1 / (1 + exp((t − 0.9T)/10)) (§4.3, main text; see the module docstring for the appendix's form).

    Computed without overflow for any t (the released code's ``math.exp`` overflows past t − 0.9T ≈ 7097).

    >>> dynamic_weight(90, 100)
    0.5
    """
    for name, value in (("step", step), ("total_steps", total_steps)):
        # exact int/float comparison: a huge int is refused before float arithmetic; NaN fails it too
        if isinstance(value, bool) or not 0 <= value <= MAX_TRAINING_STEPS:
            raise ValueError(f"{name} must lie in [0, {MAX_TRAINING_STEPS}] (§4.3's t and T)")
    x = (step - 0.9 * total_steps) / 10
    if x > 0:
        e = math.exp(-x)
        return e / (1.0 + e)
    return 1.0 / (1.0 + math.exp(x))


def tiresrag_reward(
    trajectory: Trajectory,
    golds: Golds,
    *,
    sufficiency: Verdict | None,
    thinking: ThinkingOutcome | None,
    step: int | float,
    total_steps: int | float,
    weights: TiresragWeights = DEFAULT_WEIGHTS,
) -> Reward:
    """R_sum (Eq. 5) of one trajectory, with every term in ``components``.

    Components: ``answer`` (R_A), ``sufficiency`` (R_S), ``thinking`` (R_T), ``reflection`` (R_R) and
    ``dynamic_weight`` (a_t); ``scoring.rewards.tiresrag_group`` reads them to shape the group's advantages.

    >>> from scoring.formats.tiresrag import parse_tiresrag
    >>> t = parse_tiresrag("<think>x</think><answer>Dan</answer><think>r</think><answer>Eddie Argos</answer>")
    >>> r = tiresrag_reward(t, "Eddie Argos", sufficiency=Verdict.TRUE, thinking=0.5, step=90, total_steps=100)
    >>> r.total, r.components["reflection"]
    (1.45, 1.0)
    """
    r_a = answer_reward(trajectory.answer, golds)
    r_s = sufficiency_reward(sufficiency)
    r_t = thinking_reward(thinking)
    r_r = reflection_reward(trajectory.answers, golds)
    a_t = dynamic_weight(step, total_steps)
    auxiliary = weights.thinking * r_t + weights.sufficiency * r_s + weights.reflection * r_r
    return Reward(
        total=r_a + a_t * auxiliary,
        components={
            "answer": r_a,
            "sufficiency": r_s,
            "thinking": r_t,
            "reflection": r_r,
            "dynamic_weight": a_t,
        },
    )
