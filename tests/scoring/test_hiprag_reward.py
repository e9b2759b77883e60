"""HiPRAG Eq. 1 (paper mode), its Sec. 5.3 ablations, and the released ``compute_score_em`` (reference variant)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.formats.hiprag import parse_hiprag
from scoring.rewards.hiprag import (
    hiprag_reward,
    hiprag_reward_reference,
    hiprag_rewards_for_batch,
    search_r1_format_hiprag,
)
from scoring.verdicts import MissingVerdict, Verdict
from tests.scoring.test_hiprag_format import FIG3, N, S, wrap

# Golds avoid "A": HiPRAG's normalizer drops it as an article, and an empty gold covers every answer.
T, F, U, E = Verdict.TRUE, Verdict.FALSE, Verdict.UNPARSEABLE, Verdict.ERROR
FIG3_GOLDS = ["Lisa Su"]  # CEM: "dr lisa su and 175 40" covers "lisa su"


@pytest.mark.parametrize(
    ("text", "golds", "flags", "kwargs", "total"),
    [
        # Fig. 3: every step optimal → 1 + λp
        pytest.param(FIG3, FIG3_GOLDS, [F, F, F, F], {}, 1.4, id="fig3-all-optimal"),
        # Fig. 3 with its non-search step (the GPU maker) judged wrong: one under-search → 1 + 0.4·3/4
        pytest.param(FIG3, FIG3_GOLDS, [F, T, F, F], {}, 1.3, id="fig3-one-under-search"),
        # Fig. 3 with the first search redundant as well → 1 + 0.4·2/4
        pytest.param(FIG3, FIG3_GOLDS, [T, T, F, F], {}, 1.2, id="fig3-over-and-under"),
        # every step suboptimal: the bonus vanishes but A and F still give 1
        pytest.param(FIG3, FIG3_GOLDS, [T, T, T, T], {}, 1.0, id="fig3-all-suboptimal"),
        # wrong answer: only λf·F; the gate means no verdict is needed (unusable ones are ignored)
        pytest.param(FIG3, ["Jensen Huang"], [U, E], {}, 0.2, id="wrong-answer-gated"),
        # right answer, broken format (text after </answer>): 1 − λf, no bonus
        pytest.param(FIG3 + " bye", FIG3_GOLDS, [], {}, 0.8, id="invalid-format-gated"),
        # neither: 0
        pytest.param(FIG3 + " bye", ["Jensen Huang"], [], {}, 0.0, id="nothing"),
        # λf and λp are parameters: λf = 0.4 (Table 14), λp = 0.6 (Table 2)
        pytest.param(
            FIG3, FIG3_GOLDS, [F, T, F, F], {"lambda_f": 0.4, "lambda_p": 0.6}, 1.45, id="other-lambdas"
        ),
        # λp = 0 is Search-R1 v0.3's outcome + format reward
        pytest.param(FIG3, FIG3_GOLDS, [T, T, T, T], {"lambda_p": 0.0}, 1.0, id="lambda-p-zero"),
        # Sec. 5.3 over-only: the non-search step is excluded, N = 3 search steps, its verdict is not needed
        pytest.param(
            FIG3, FIG3_GOLDS, [T, U, F, F], {"process": "over_only"}, 1 + 0.4 * 2 / 3, id="over-only"
        ),
        # Sec. 5.3 under-only: only the non-search step counts, the over-search flags are ignored
        pytest.param(FIG3, FIG3_GOLDS, [T, F, T, E], {"process": "under_only"}, 1.4, id="under-only"),
        pytest.param(FIG3, FIG3_GOLDS, [T, T, T, E], {"process": "under_only"}, 1.0, id="under-only-flagged"),
    ],
)
def test_it_computes_eq_1(
    text: str, golds: list[str], flags: list[Verdict], kwargs: dict[str, Any], total: float
) -> None:
    reward = hiprag_reward(parse_hiprag(text), golds, flags, **kwargs)
    assert reward.total == pytest.approx(total)


def test_it_reports_the_components_of_fig_3() -> None:
    reward = hiprag_reward(parse_hiprag(FIG3), FIG3_GOLDS, [F, T, F, F])
    assert reward.components == {
        "answer": 1.0,
        "format": 1.0,
        "process_bonus": pytest.approx(0.3),
        "n_steps": 4.0,
        "n_search": 3.0,
        "n_non_search": 1.0,
        "n_counted": 4.0,
        "n_optimal": 3.0,
        "n_over": 0.0,
        "n_under": 1.0,
    }
    assert search_r1_format_hiprag(parse_hiprag(FIG3), FIG3_GOLDS).total == 1.0


@pytest.mark.parametrize(
    ("flags", "kwargs", "message"),
    [
        # an unparseable judge reply is never read as "not over-searched"
        pytest.param([U, F, F, F], {}, "step 1: over-search verdict is unparseable", id="unparseable"),
        # an API error neither
        pytest.param([F, E, F, F], {}, "step 2: under-search verdict is error", id="error"),
        # a verdict that never came
        pytest.param([F, F], {}, "step 3: no over-search verdict", id="missing"),
        # ablations still need the verdicts of the steps they count
        pytest.param(
            [F, F, U, F],
            {"process": "over_only"},
            "step 3: over-search verdict is unparseable",
            id="over-only",
        ),
    ],
)
def test_it_refuses_unusable_verdicts(flags: list[Verdict], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(MissingVerdict, match=message):
        hiprag_reward(parse_hiprag(FIG3), FIG3_GOLDS, flags, **kwargs)


def test_it_takes_the_batch_average_when_an_ablation_has_nothing_to_count() -> None:
    paris = "<answer>Paris</answer>"
    only_search, only_non_search = parse_hiprag(wrap(S + S, paris)), parse_hiprag(wrap(N, paris))
    golds = ["Paris"]
    with pytest.raises(ValueError, match="batch_average_bonus"):
        hiprag_reward(only_non_search, golds, [F], process="over_only")
    rewards = hiprag_rewards_for_batch(
        [only_search, only_non_search, parse_hiprag(wrap(S, paris))],
        [golds, golds, golds],
        [[T, F], [F], [F]],
        process="over_only",
    )
    # bonuses earned: 0.4·1/2 and 0.4·1/1 → the search-free trajectory gets their mean, 0.3
    assert [r.total for r in rewards] == pytest.approx([1.2, 1.3, 1.4])


SOLUTION = wrap(S + N + N, "<answer>Paris</answer>")


@pytest.mark.parametrize(
    ("text", "flags", "sfs", "total"),
    [
        # one search step among three, all optimal: 0.4·3/1 — the released bonus exceeds λp
        pytest.param(SOLUTION, [False, False, False], 0.2, 2.2, id="bonus-over-search-steps"),
        pytest.param(SOLUTION, [True, True, False], 0.2, 1.4, id="flags-count-against-all"),
        # no search step: +0.4 whatever the under-search verdicts say
        pytest.param(wrap(N + N, "<answer>Paris</answer>"), [True, True], 0.2, 1.4, id="no-search-step"),
        # trailing text breaks the training checker: 1 − λf and no judging
        pytest.param(SOLUTION + " x", [], 0.2, 0.8, id="gate"),
        # λf is the structure_format_score
        pytest.param(wrap(N, "<answer>Rome</answer>"), [], 0.4, 0.4, id="wrong"),
        # validation (sfs = 0): CEM of extract_solution, which needs two <answer> spans
        pytest.param(SOLUTION, [], 0.0, 0, id="validation-one-span"),
        pytest.param("<answer>x</answer>" + SOLUTION, [], 0.0, 1, id="validation-two-spans"),
    ],
)
def test_it_reproduces_compute_score_em(text: str, flags: list[bool], sfs: float, total: float) -> None:
    assert hiprag_reward_reference(text, ["Paris"], flags, structure_format_score=sfs) == pytest.approx(total)


verdicts = st.sampled_from([Verdict.TRUE, Verdict.FALSE])
trajectories = st.lists(st.sampled_from([S, N]), min_size=1, max_size=6).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    steps=trajectories,
    answer=st.sampled_from(["Paris", "Rome"]),
    valid=st.booleans(),
    flags=st.lists(verdicts, min_size=6, max_size=6),
    lambda_f=st.floats(0, 1),
    lambda_p=st.floats(0, 1),
)
def test_the_paper_reward_stays_within_0_and_1_plus_lambda_p(
    steps: str, answer: str, valid: bool, flags: list[Verdict], lambda_f: float, lambda_p: float
) -> None:
    # The paper's bound: R = 1 + λp·N_corr/N ≤ 1 + λp when A = F = 1, else at most 1; so R ∈ [0, 1] only if λp = 0.
    trajectory = parse_hiprag(wrap(steps, f"<answer>{answer}</answer>") + ("" if valid else "!"))
    reward = hiprag_reward(
        trajectory, ["Paris"], flags[: len(trajectory.steps)], lambda_f=lambda_f, lambda_p=lambda_p
    )
    assert 0.0 <= reward.total <= 1.0 + lambda_p + 1e-12
    if not (answer == "Paris" and valid):
        assert reward.total <= 1.0


@settings(max_examples=300, deadline=None)
@given(steps=trajectories, flags=st.lists(st.booleans(), min_size=6, max_size=6))
def test_the_released_reward_can_exceed_1_plus_lambda_p(steps: str, flags: list[bool]) -> None:
    # Released range: [0, 1 + 0.4·N/max(1, N_search)] (REFERENCE.md discrepancy 1), not [0, 1.4].
    text = wrap(steps, "<answer>Paris</answer>")
    n_steps, n_search = steps.count("<step>"), steps.count("<search>")
    total = hiprag_reward_reference(text, ["Paris"], flags[:n_steps])
    assert 1.0 <= total <= 1.0 + 0.4 * n_steps / max(1, n_search) + 1e-12
