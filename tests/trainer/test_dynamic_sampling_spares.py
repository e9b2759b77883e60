"""Dynamic sampling's spare groups (trainer.dynamic_sampling.DynamicSampler.sample) with a scripted rollout and
scorer: no model, no TRL. The TRL path is covered in test_dynamic_sampling.py."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from trainer.config import ConfigError, config_from_dict
from trainer.dynamic_sampling import DynamicSampler
from trainer.rewards import ScoreLedger
from trainer.rollout import Rollout, RolloutRequest, Segment

G = 2  # rollouts per question
SPREAD = {f"q{i}": i % 3 == 1 for i in range(12)}  # q1, q4, q7, q10 have reward spread; the rest are flat
ROWS = [{"prompt": prompt} for prompt in SPREAD]
STATE = SimpleNamespace(global_step=3)


class _Scorer:
    """Totals 0, 1, 0, … for a question with spread, all 0 for a flat one; records what it was asked to score."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(
        self, requests: Sequence[RolloutRequest], rollouts: Sequence[Rollout], state: Any
    ) -> list[float | None]:
        assert [r.text for r in rollouts] == [
            r.prompt for r in requests
        ]  # the rollouts came with their requests
        self.calls.append([r.prompt for r in requests][::G])
        return [float(i % 2) if SPREAD[r.prompt] else 0.0 for i, r in enumerate(requests)]


class _Rollout:
    """One rollout per request whose text is its prompt; records every call's (prompt, index) per group."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, int]]] = []

    def __call__(self, requests: Sequence[RolloutRequest], policy: Any) -> list[Rollout]:
        self.calls.append([(r.prompt, r.index) for r in requests][::G])
        return [Rollout((1,), (Segment((2,), True, r.prompt),), r.prompt) for r in requests]


def _requests(prompts: Sequence[str]) -> list[RolloutRequest]:
    return [RolloutRequest(p, {"prompt": p}, k * G + j) for k, p in enumerate(prompts) for j in range(G)]


def _sample(
    batch: Sequence[str], *, spares: int, max_draws: int = 2, seed: int = 0, requests: Any = None
) -> tuple[list[tuple[str, int]], _Rollout, dict[str, float], _Scorer]:
    """The filled batch as (prompt, index) per group, the rollout's calls, the step's metrics, the scorer."""
    rollout, scorer, ledger = _Rollout(), _Scorer(), ScoreLedger()
    sampler = DynamicSampler(
        scorer, ROWS, group_size=G, max_draws=max_draws, seed=seed, ledger=ledger, spare_groups=spares
    )
    kept, rollouts = sampler.sample(requests or _requests(batch), rollout, None, state=STATE)
    assert [r.text for r in rollouts] == [r.prompt for r in kept]  # each rollout stays with its request
    assert [r.index for r in kept] == list(range(len(kept)))  # every completion numbered by its place
    return [(r.prompt, r.index) for r in kept][::G], rollout, ledger.sampling, scorer


# What the sequential redraws gave before spare groups existed (trainer/dynamic_sampling.py at a89fc3a), batch
# q0..q3 (q1 with spread), step 3, max_draws 2: the filled batch and each round's (prompt, slot index) per group.
BEFORE_SPARES = {
    0: (["q4", "q1", "q2", "q7"], [[("q5", 0), ("q6", 4), ("q7", 6)], [("q4", 0), ("q11", 4)]], 5.0),
    1: (["q0", "q1", "q10", "q7"], [[("q11", 0), ("q10", 4), ("q7", 6)], [("q6", 0)]], 4.0),
    2: (["q10", "q1", "q7", "q3"], [[("q5", 0), ("q7", 4), ("q8", 6)], [("q10", 0), ("q9", 6)]], 5.0),
}


@pytest.mark.parametrize("seed", sorted(BEFORE_SPARES))
def test_without_spares_the_draws_are_exactly_the_sequential_rounds_of_before(seed: int) -> None:
    kept, rollout, metrics, _ = _sample(["q0", "q1", "q2", "q3"], spares=0, seed=seed)

    prompts, rounds, draws = BEFORE_SPARES[seed]
    assert [p for p, _ in kept] == prompts
    assert rollout.calls[0] == [("q0", 0), ("q1", 2), ("q2", 4), ("q3", 6)]  # the batch alone
    assert rollout.calls[1:] == rounds
    assert metrics == {
        "groups/spread_rate_before": 0.25,
        "groups/dynamic_draws": draws,
        "groups/redraw_rounds": float(len(rounds)),
        "groups/spare_groups_used": 0.0,
        "groups/spare_groups_dropped": 0.0,
    }


def test_spares_covering_the_shortfall_make_one_rollout_call() -> None:
    # q0 and q2 flat; seed 2 draws the spares q4, q6, q7, q9: q4 and q7 with spread, in that order
    kept, rollout, metrics, _ = _sample(["q0", "q1", "q2", "q10"], spares=4, seed=2)

    assert rollout.calls == [
        [("q0", 0), ("q1", 2), ("q2", 4), ("q10", 6), ("q4", 8), ("q6", 10), ("q7", 12), ("q9", 14)]
    ]  # one call: the batch, then the spares past its own places
    # the batch's groups with spread keep their places; the flat places, in order, take the spares with spread
    assert kept == [("q4", 0), ("q1", 2), ("q7", 4), ("q10", 6)]
    assert metrics == {
        "groups/spread_rate_before": 0.5,
        "groups/dynamic_draws": 0.0,
        "groups/redraw_rounds": 0.0,
        "groups/spare_groups_used": 2.0,
        "groups/spare_groups_dropped": 2.0,  # q6 flat, q9 flat: never trained on
    }


def test_too_few_spares_leave_the_rest_to_the_sequential_rounds() -> None:
    # three flat places (0, 4, 6); seed 4 rolls one spare with the batch, q7 (spread): it takes place 0, and one
    # round draws for the two places left
    kept, rollout, metrics, _ = _sample(["q0", "q1", "q2", "q3"], spares=1, seed=4)

    assert rollout.calls == [
        [("q0", 0), ("q1", 2), ("q2", 4), ("q3", 6), ("q7", 8)],
        [("q10", 4), ("q4", 6)],
    ]
    assert kept == [("q7", 0), ("q1", 2), ("q10", 4), ("q4", 6)]
    assert metrics == {
        "groups/spread_rate_before": 0.25,
        "groups/dynamic_draws": 2.0,
        "groups/redraw_rounds": 1.0,
        "groups/spare_groups_used": 1.0,
        "groups/spare_groups_dropped": 0.0,
    }


def test_a_flat_spare_is_dropped_and_the_rounds_draw_other_questions() -> None:
    # seed 0's one spare, q5, is flat: dropped; both rounds draw, never q5 again nor a question of the batch
    kept, rollout, metrics, _ = _sample(["q0", "q1", "q2", "q3"], spares=1, seed=0)

    assert rollout.calls[0][4:] == [("q5", 8)]
    redrawn = [p for call in rollout.calls[1:] for p, _ in call]
    assert redrawn and not set(redrawn) & {"q5", "q0", "q1", "q2", "q3"}
    assert "q5" not in [p for p, _ in kept]
    assert (metrics["groups/spare_groups_used"], metrics["groups/spare_groups_dropped"]) == (0.0, 1.0)
    assert metrics["groups/dynamic_draws"] == len(redrawn)
    assert metrics["groups/redraw_rounds"] == len(rollout.calls) - 1 == 2


def test_a_group_is_never_both_kept_and_replaced() -> None:
    for seed in range(20):
        for spares in (0, 1, 3, 6):
            kept, rollout, _, _ = _sample(["q0", "q1", "q2", "q4"], spares=spares, seed=seed)
            prompts = [p for p, _ in kept]
            assert len(set(prompts)) == len(prompts)
            assert (prompts[1], prompts[3]) == ("q1", "q4")  # groups with spread stay where they were
            for place in (0, 2):  # a flat place holds its own question or a replacement with spread
                assert prompts[place] == ("q0", "q1", "q2", "q4")[place] or SPREAD[prompts[place]]
            rolled = [p for call in rollout.calls for p, _ in call]
            assert len(set(rolled)) == len(rolled)  # no question rolled out twice in a step


def test_spares_are_not_scored_when_no_group_is_flat_and_are_all_dropped() -> None:
    kept, rollout, metrics, scorer = _sample(["q1", "q4"], spares=2)

    assert kept == [("q1", 0), ("q4", 2)]
    assert len(rollout.calls) == 1 and len(rollout.calls[0]) == 4
    assert scorer.calls == [["q1", "q4"]]  # the batch alone
    assert (metrics["groups/spare_groups_used"], metrics["groups/spare_groups_dropped"]) == (0.0, 2.0)


def test_no_spares_when_the_rounds_are_off_or_the_batch_is_cut() -> None:
    _, rollout, metrics, _ = _sample(["q0", "q1"], spares=2, max_draws=0)
    assert rollout.calls == [[("q0", 0), ("q1", 2)]]  # max_draws 0 measures only
    assert metrics["groups/spread_rate_before"] == 0.5 and metrics["groups/spare_groups_dropped"] == 0.0

    cut = [RolloutRequest("q0", {}, 0), RolloutRequest("q1", {}, 1)]  # a group cut between processes
    kept, rollout, metrics, _ = _sample([], spares=2, requests=cut)
    assert len(rollout.calls) == 1 and [p for p, _ in kept] == ["q0"] and metrics == {}


def test_the_heartbeat_names_the_spares_and_the_spares_are_seeded() -> None:
    notes: list[str] = []

    class Progress:  # trainer.progress.ProgressReporter's part the sampler uses: the note kept in each update
        note = ""

        def update(self, *args: Any) -> None:
            notes.append(self.note)

    progress = Progress()

    def spares(seed: int) -> list[str]:
        rollout = _Rollout()
        sampler = DynamicSampler(
            _Scorer(), ROWS, group_size=G, max_draws=1, seed=seed, ledger=ScoreLedger(), spare_groups=3
        )
        sampler.progress = progress
        sampler.sample(_requests(["q1", "q2"]), rollout, None, state=STATE)
        return [p for p, _ in rollout.calls[0][2:]]

    assert spares(0) == spares(0)
    assert "with 3 spare groups (dynamic sampling)" in notes
    assert {tuple(spares(seed)) for seed in range(6)} != {tuple(spares(0))}


def test_the_setting_is_declared_with_its_range() -> None:
    assert config_from_dict({"output_dir": "x"}).training.dynamic_sampling_spare_groups == 1
    with pytest.raises(ConfigError, match=r"training\.dynamic_sampling_spare_groups"):
        config_from_dict({"output_dir": "x", "training": {"dynamic_sampling_spare_groups": -1}})
    with pytest.raises(ValueError, match="spare_groups"):
        DynamicSampler(
            _Scorer(), ROWS, group_size=G, max_draws=1, seed=0, ledger=ScoreLedger(), spare_groups=-1
        )
