"""TIRESRAG-R1's group-level shaping: the paper's (Eqs. 6–7, Alg. 1) and the released trainer's."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.rewards.result import Reward
from scoring.rewards.tiresrag_group import (
    consistency_penalties,
    difficulty_weight,
    group_normalize,
    keep_group,
    tiresrag_group_advantages,
)
from scoring.rewards.tiresrag_reference import (
    JudgeServerReply,
    MathRuleProxyReference,
    consistency_penalty_reference,
    difficulty_weight_reference,
    f1_score_reference,
    normalize_answer_reference,
    reflection_reference,
)
from scoring.rewards.tiresrag_reference_trainer import (
    compute_reward_reference,
    f32,
    filter_groups_reference,
    process_experiences_reference,
)

GOLD = "Eddie Argos"

# --- difficulty weight (Eq. 6) ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rho", "expected"),
    [
        pytest.param(0.0, 0.4 + 1.1 / (1 + math.exp(-7.5)), id="no-rollout-sufficient"),  # hardest: ≈ B = 1.5
        pytest.param(0.75, 0.95, id="at-rho0"),  # the midpoint (A + B) / 2
        pytest.param(1.0, 0.4 + 1.1 / (1 + math.exp(2.5)), id="all-sufficient"),  # easiest: towards A = 0.4
        pytest.param(1e6, 0.4, id="no-overflow-high"),  # the released np.exp would overflow (with a warning)
        pytest.param(-1e6, 1.5, id="no-overflow-low"),
    ],
)
def test_it_weights_groups_by_retrieval_difficulty(rho: float, expected: float) -> None:
    assert difficulty_weight(rho) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("rho", [0.2, 0.4, 0.6, 0.75, 0.8])
def test_it_agrees_with_the_released_difficulty_weight(rho: float) -> None:
    # same formula; the released one is the vectors' reference (ρ there is the group mean of sufficiency labels)
    assert difficulty_weight(rho) == pytest.approx(difficulty_weight_reference(rho), rel=1e-15)


@given(st.floats(-10.0, 10.0))
def test_it_keeps_the_difficulty_weight_between_a_and_b(rho: float) -> None:
    assert 0.4 <= difficulty_weight(rho) <= 1.5


# --- normalisation and the consistency penalty (Alg. 1 line 15, Eq. 7) -----------------------------------------


def test_it_normalises_the_papers_two_groups_identically() -> None:
    # §4.4's motivating example: very different raw rewards, identical normalised advantages
    easy = group_normalize([0.8, 0.85, 0.9, 0.95, 1.0])
    hard = group_normalize([0.0, 0.05, 0.1, 0.15, 0.2])
    assert easy == pytest.approx(hard)
    assert easy == pytest.approx([-math.sqrt(2), -math.sqrt(2) / 2, 0.0, math.sqrt(2) / 2, math.sqrt(2)])


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # population std (1/G, Alg. 1 line 15): ±1 for two values; the sample std would give ±0.707
        pytest.param([1.0, 0.0], [1.0, -1.0], id="population-std"),
        # zero variance: silent in the paper; nobody is better than anybody, so all 0 (not a division by 0)
        pytest.param([0.7, 0.7, 0.7], [0.0, 0.0, 0.0], id="zero-variance"),
        pytest.param([0.3], [0.0], id="single-rollout"),
    ],
)
def test_it_normalises_with_the_population_std(values: list[float], expected: list[float]) -> None:
    assert group_normalize(values) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("answer", "thinking", "sufficiency", "expected"),
    [
        # strong reasoning and evidence but a wrong answer: one negative z-score ⇒ λ·1; the right answer with weak
        # reasoning and no evidence has two negative z-scores ⇒ product > 0 ⇒ no penalty
        pytest.param([0.0, 1.0], [0.9, 0.1], [1.0, 0.0], [0.1, 0.0], id="inconsistent"),
        # as printed, Eq. 7 also penalises a rollout below the mean on all three (three negatives): a quirk kept
        pytest.param([1.0, 0.0], [0.9, 0.1], [1.0, 0.0], [0.0, 0.1], id="all-low-is-penalised"),
        # one dimension constant: its z-scores are 0, so the product is 0 and nobody is penalised
        pytest.param([1.0, 0.0], [0.1, 0.9], [1.0, 1.0], [0.0, 0.0], id="constant-sufficiency"),
    ],
)
def test_it_penalises_inconsistent_rollouts_per_eq_7(
    answer: list[float], thinking: list[float], sufficiency: list[float], expected: list[float]
) -> None:
    assert consistency_penalties(answer, thinking, sufficiency) == pytest.approx(expected)


def test_it_refuses_penalty_inputs_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="same rollouts"):
        consistency_penalties([1.0, 0.0], [0.5], [1.0, 0.0])


@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.sampled_from([0.0, 1.0])), min_size=1, max_size=8)
)
def test_it_never_makes_a_negative_penalty(rollouts: list[tuple[float, float, float]]) -> None:
    answer, thinking, sufficiency = (list(column) for column in zip(*rollouts, strict=True))
    assert all(p >= 0.0 for p in consistency_penalties(answer, thinking, sufficiency))


# --- the group filter -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer_f1", "paper", "released"),
    [
        # all correct / all wrong: saturated, dropped by both
        pytest.param([1.0] * 5, False, False, id="all-correct"),
        pytest.param([0.0] * 5, False, False, id="all-wrong"),
        pytest.param([1.0, 0.0, 0.5, 0.0, 1.0], True, True, id="mixed"),
        # exact bounds: the paper's strict 0.1 < mean < 0.9 drops them; released float32 keeps F1 = 0.1 / 0.9
        pytest.param([0.1] * 5, False, True, id="exactly-0.1"),
        pytest.param([0.9] * 5, False, True, id="exactly-0.9"),
        # released: max 0.1 in the batch is float32 0.10000000149 > 0.1 ⇒ kept
        pytest.param([0.0, 0.0, 0.1, 0.05, 0.0], False, True, id="max-exactly-0.1"),
        # just inside the paper's bounds
        pytest.param([0.1000001] * 5, True, True, id="just-above-0.1"),
        pytest.param([0.8999999] * 5, True, True, id="just-below-0.9"),
        # mean 0.9 with one partial answer: paper drops (mean not < 0.9), released keeps (min 0.5 < 0.9)
        pytest.param([1.0, 1.0, 1.0, 1.0, 0.5], False, True, id="mean-0.9"),
        # mostly wrong with one partial: paper drops (mean 0.08), released keeps (max 0.4 > 0.1)
        pytest.param([0.0, 0.0, 0.0, 0.0, 0.4], False, True, id="one-partial"),
        # released drops all ≤ 0.1 even when not all 0
        pytest.param([0.09, 0.0, 0.05, 0.0, 0.0], False, False, id="all-below-0.1"),
    ],
)
def test_it_filters_saturated_groups(answer_f1: list[float], paper: bool, released: bool) -> None:
    assert keep_group(answer_f1) is paper
    assert bool(filter_groups_reference(answer_f1, 5).kept_indices) is released


def test_it_logs_the_released_filter_ratios() -> None:
    result = filter_groups_reference([1.0, 0.0, 0.5] + [1.0] * 3 + [0.0] * 3, 3)
    assert result.kept_indices == [0, 1, 2]
    assert result.wandb_log == {
        "train/filtered_>0.9_experience": 1 / 3,
        "train/filtered_<0.1_experience": 1 / 3,
        "train/(max-min)<0.1_experience": 0.0,
    }
    with pytest.raises(RuntimeError, match="invalid for input of size 4"):  # torch reshape of a ragged batch
        filter_groups_reference([1.0, 0.0, 0.5, 0.0], 3)


# --- the shaped advantage ---------------------------------------------------------------------------------------


def _reward(answer: float, thinking: float, sufficiency: float, reflection: float = 0.0) -> Reward:
    a_t = 0.5
    total = answer + a_t * (0.6 * thinking + 0.3 * sufficiency + 0.3 * reflection)
    return Reward(
        total, {"answer": answer, "thinking": thinking, "sufficiency": sufficiency, "reflection": reflection}
    )


def test_it_shapes_the_advantages_of_a_kept_group() -> None:
    group = [_reward(1.0, 0.9, 1.0), _reward(0.0, 0.8, 1.0), _reward(0.0, 0.2, 0.0), _reward(1.0, 0.5, 0.0)]
    shaped = tiresrag_group_advantages(group)
    assert shaped.kept and shaped.rho == 0.5
    assert shaped.difficulty == pytest.approx(0.4 + 1.1 / (1 + math.exp(-2.5)))
    assert shaped.normalized == pytest.approx(group_normalize([r.total for r in group]))
    assert shaped.penalties == pytest.approx(
        consistency_penalties([1.0, 0.0, 0.0, 1.0], [0.9, 0.8, 0.2, 0.5], [1.0, 1.0, 0.0, 0.0])
    )
    expected = [(a - p) * shaped.difficulty for a, p in zip(shaped.normalized, shaped.penalties, strict=True)]
    assert shaped.advantages == pytest.approx(expected)
    # rollout 2 reasons well with sufficient evidence but answers wrong; rollout 3 is below the group on all
    # three counts (Eq. 7's odd-number-of-negatives quirk); both are penalised
    assert [p > 0 for p in shaped.penalties] == [False, True, True, False]


def test_it_drops_a_saturated_group_before_computing_advantages() -> None:
    shaped = tiresrag_group_advantages([_reward(1.0, 0.9, 1.0), _reward(1.0, 0.4, 1.0)])
    assert not shaped.kept and shaped.advantages == ()
    assert shaped.difficulty == pytest.approx(difficulty_weight(1.0))  # still reported for logging


@given(
    st.lists(
        st.tuples(
            st.floats(0, 1), st.floats(0, 1), st.sampled_from([0.0, 1.0]), st.sampled_from([-1.0, 0.0, 1.0])
        ),
        min_size=1,
        max_size=8,
    )
)
def test_it_keeps_shaped_advantages_finite_and_bounded(
    rollouts: list[tuple[float, float, float, float]],
) -> None:
    shaped = tiresrag_group_advantages([_reward(*r) for r in rollouts])
    assert 0.4 <= shaped.difficulty <= 1.5
    # |A_i| ≤ sqrt(G − 1) for a population z-score; the penalty is at most λ·(G − 1)^{3/2}
    g = len(rollouts)
    bound = (math.sqrt(g - 1) + 0.1 * (g - 1) ** 1.5) * 1.5 + 1e-9
    assert all(math.isfinite(a) and abs(a) <= bound for a in shaped.advantages)


# --- the released trainer's arithmetic --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # why the released filter keeps F1 = 0.1: float32(0.1) > 0.1
        pytest.param(0.1, 0.10000000149011612, id="rounds-to-nearest"),
        # and keeps F1 = 0.9: float32(0.9) < 0.9
        pytest.param(0.9, 0.8999999761581421, id="below"),
        # beyond float32's range a cast gives inf (struct.pack alone would raise)
        pytest.param(1e39, math.inf, id="overflow-is-inf"),
        pytest.param(-1e39, -math.inf, id="negative-overflow"),
    ],
)
def test_it_rounds_to_float32(value: float, expected: float) -> None:
    assert f32(value) == expected


@pytest.mark.parametrize(
    ("rewards", "penalty", "estimator", "expected"),
    [
        # group_norm: unbiased std (n − 1), unlike the paper's population std
        pytest.param([1.0, 0.0], [0.0, 0.0], "group_norm", [1 / math.sqrt(2), -1 / math.sqrt(2)], id="unbiased-std"),
        # zero variance: (0 / 1e-9 − penalty) · W
        pytest.param([0.7, 0.7], [0.1, 0.0], "group_norm", [-0.1, 0.0], id="zero-variance"),
        # one sample per prompt: the unbiased std is NaN
        pytest.param([0.7], [0.0], "group_norm", [math.nan], id="single-sample-nan"),
        # reinforce_baseline: mean-centred, minus the penalty, no std, no W
        pytest.param([1.0, 0.0], [0.25, 0.0], "reinforce_baseline", [0.25, -0.5], id="reinforce-baseline"),
        # rloo: leave-one-out baseline, no penalty
        pytest.param([1.0, 0.0, 0.5], [0.0, 0.0, 0.0], "rloo", [0.75, -0.75, 0.0], id="rloo"),
        # any other estimator (gae): the rewards unchanged
        pytest.param([1.0, 0.0], [0.0, 0.0], "gae", [1.0, 0.0], id="passthrough"),
    ],
)  # fmt: skip
def test_it_shapes_advantages_like_the_released_trainer(
    rewards: list[float], penalty: list[float], estimator: str, expected: list[float]
) -> None:
    shaped = process_experiences_reference(rewards, [1.0] * len(rewards), penalty, len(rewards), estimator)
    assert shaped == pytest.approx(expected, rel=1e-6, nan_ok=True)


def test_it_multiplies_the_released_advantage_by_the_difficulty_weight() -> None:
    rewards = [1.5, 0.2, 0.9, -0.1]
    shaped = process_experiences_reference(rewards, [1.2] * 4, [0.05, 0.0, 0.3, 0.0], 4)
    std = statistics.stdev(rewards)  # unbiased, as torch.std
    mean = statistics.fmean(rewards)
    expected = [((r - mean) / std - p) * 1.2 for r, p in zip(rewards, [0.05, 0.0, 0.3, 0.0], strict=True)]
    assert shaped == pytest.approx(expected, rel=1e-6)


def test_it_clips_and_places_the_released_token_reward() -> None:
    # clamped to [−10, 10], on the last action token; kl_coef 0 (as the script) leaves −0.0 elsewhere
    assert compute_reward_reference([2.5, -12.0], 0.0, [[0.1, 0.2, 0.3], [0.0, 0.5]], [3, 2], [-10, 10]) == [
        [0.0, 0.0, 2.5],
        [0.0, -10.0],
    ]
    # a KL coefficient below 0 counts as 0; without a clip range nothing is clamped
    assert compute_reward_reference([12.0], -1.0, [[0.5]], [1], None) == [[12.0]]
    # with a KL coefficient: −coef·kl on every token, the reward added on the last one
    assert compute_reward_reference([1.0], 0.5, [[0.5, 0.25]], [2], None) == [[-0.25, 0.875]]


@pytest.mark.parametrize(
    ("answer", "thinking", "sufficiency", "group_size", "error"),
    [
        # released: numpy reshape of 3 rewards into rows of 2
        pytest.param([1.0, 0.0, 0.5], [0.9, 0.2, 0.8], [1, 0, 0], 2, ValueError, id="ragged"),
        # released: a string in a numpy array fails its add.reduce
        pytest.param([1.0, 0.0], [0.9, "high"], [1, 0], 2, TypeError, id="string"),
        pytest.param([1.0, 0.0], [0.9, None], [1, 0], 2, TypeError, id="none"),
    ],
)
def test_it_reproduces_the_released_penalty_failures(
    answer: list[object],
    thinking: list[object],
    sufficiency: list[object],
    group_size: int,
    error: type[Exception],
) -> None:
    with pytest.raises(error):
        consistency_penalty_reference(answer, thinking, sufficiency, 1, 100, group_size=group_size)


def test_it_gives_no_released_penalty_to_groups_of_one() -> None:
    # a group of one has std 0 (+1e-8) and zero deviations, so every product is 0
    assert consistency_penalty_reference([0.2, 0.8], [0.9, 0.1], [1, 0], 1, 100, group_size=1) == [
        [0.0],
        [0.0],
    ]


# --- the released reward server (per batch) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "reward", "flags"),
    [
        # (reflect reward, 没有反思的, 没有改变的reflect, 反思前正确的，后面错误的, 反思前错误的，后面正确的)
        pytest.param(["Dan Auerbach", GOLD], 0, (0, 0, 0, 1), id="wrong-to-right-earns-0"),
        pytest.param([GOLD, "Dan Auerbach"], -1, (0, 0, 1, 0), id="right-to-wrong"),
        pytest.param([GOLD, GOLD], 0, (0, 1, 0, 0), id="kept-right"),
        pytest.param([GOLD, "Eddie Argos of Art Brut"], -1, (0, 0, 1, 0), id="right-but-lower-f1"),
        pytest.param(["Dan", "Jack"], -1, (0, 1, 0, 0), id="both-wrong"),
        pytest.param([GOLD], 0, (1, 0, 0, 0), id="single-right"),
        pytest.param(["Dan"], -1, (1, 0, 0, 0), id="single-wrong"),
        pytest.param([], 0, (0, 0, 0, 0), id="none"),
        # "correct" is F1 > 0.5 or CEM: "Argos" (F1 0.67) counts as right
        pytest.param(["Argos", "Dan"], -1, (0, 0, 1, 0), id="partial-counts-as-right"),
    ],
)
def test_it_reproduces_the_released_reflection_reward(
    answers: list[str], reward: int, flags: tuple[int, int, int, int]
) -> None:
    outcome = reflection_reference(answers, GOLD)
    assert outcome.reward == reward
    assert (
        outcome.no_reflection,
        outcome.unchanged_reflection,
        outcome.right_to_wrong,
        outcome.wrong_to_right,
    ) == flags


@pytest.mark.parametrize(
    ("prediction", "gold", "normalized", "f1"),
    [
        # TIRESRAG's normaliser turns punctuation into spaces (SQuAD's deletes it): "it's" ≠ "its"
        pytest.param("it's", "its", "it s", 0.0, id="apostrophe-splits"),
        pytest.param("The_Beatles", "Beatles", "beatles", 1.0, id="underscore"),
        pytest.param("True", "yes", "true", 1.0, id="bool-mapping"),
    ],
)
def test_it_reproduces_the_released_normaliser(
    prediction: str, gold: str, normalized: str, f1: float
) -> None:
    assert normalize_answer_reference(prediction) == normalized
    assert f1_score_reference(prediction, gold)[0] == f1


def _query(response: str, question: str = "Who sings in Art Brut?") -> str:
    return f"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n{response}<|im_end|>"


SERVER = MathRuleProxyReference([{"question": "Who sings in Art Brut?", "answer": GOLD}])


def test_it_scores_a_batch_like_the_released_server() -> None:
    queries = [
        _query(f"<think>a</think><answer>{GOLD}</answer>"),
        _query(f"<think>the singer is {GOLD}</think>"),
    ]
    result = SERVER.get_reward(queries, 2, [0, 0], 100, 90, JudgeServerReply(200, [1, 0], [0.5, 1.5]))
    rewards = result.rewards
    # no <answer>: the whole solution is the prediction, so the gold's tokens inside it give F1 > 0
    # ("think singer is eddie argos think": P = 2/6, R = 1)
    assert rewards["纯answer分数"] == pytest.approx([1.0, 0.5])
    # a_t = 0.5: 1 + 0.5·(0.3 + 0.3 + 0) and 0.5 + 0.5·(0.9 + 0 + 0); the 1.5 thinking score is not clipped
    assert rewards["总的分数"] == pytest.approx([1.3, 0.95])
    assert rewards["纯format分数"] == [0.2, 0]
    assert result.sufficiency_request_payload["data"][0] == {
        "question": "Who sings in Art Brut?",
        "answer": GOLD,
        "context": "<think>a</think>",
    }


@pytest.mark.parametrize(
    ("queries", "group_size", "reply", "error"),
    [
        # judge server down: `sufficient_res` was never bound
        pytest.param([_query("<think>a</think><answer>X</answer>")], 1, JudgeServerReply(500), UnboundLocalError, id="judge-500"),
        # a question not in --data_path
        pytest.param([_query("<think>a</think><answer>X</answer>", "Unknown?")], 1, JudgeServerReply(200, [1], [0.5]), KeyError, id="unknown-question"),
        # numpy reshape of 3 samples into groups of 2
        pytest.param([_query("<think>a</think><answer>X</answer>")] * 3, 2, JudgeServerReply(200, [1, 1, 1], [0.5] * 3), ValueError, id="ragged-group"),
        # a non-numeric judge value made numpy's reductions fail
        pytest.param([_query("<think>a</think><answer>X</answer>")] * 2, 2, JudgeServerReply(200, [1, 0], [0.5, "high"]), TypeError, id="string-score"),
    ],
)  # fmt: skip
def test_it_reproduces_the_released_server_failures(
    queries: list[str], group_size: int, reply: JudgeServerReply, error: type[Exception]
) -> None:
    with pytest.raises(error):
        SERVER.get_reward(queries, group_size, [0] * len(queries), 100, 1, reply)
