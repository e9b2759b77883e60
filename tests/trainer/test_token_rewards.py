from __future__ import annotations

import random
from typing import Any

import pytest

from scoring.scorer import score
from trainer.rollout import RolloutRequest
from trainer.scripted import ScriptedSearchRollout, scripted_parts
from trainer.token_rewards import (
    process_supervision_advantages,
    step_positions,
    token_rewards,
    turn_ends,
)


@pytest.mark.parametrize(
    ("mask", "ends"),
    [
        ([1, 1, 1], [2]),  # one turn, no search
        ([1, 0, 0, 1], [0, 3]),  # a search turn, a retrieved span, the answer turn
        ([1, 1, 0, 1, 0, 1, 1], [1, 3, 6]),
        ([0, 1, 0], [1]),  # leading and trailing environment tokens
    ],
)
def test_it_finds_turn_ends(mask: list[int], ends: list[int]) -> None:
    assert turn_ends(mask) == ends


def test_it_puts_surplus_steps_on_the_last_policy_token() -> None:
    placement = step_positions(4, [1, 0, 1])
    assert placement.positions == (0, 2, 2, 2)
    assert not placement.aligned


def test_it_places_autosearch_turn_rewards_on_the_last_token_of_each_turn(tokenizer: Any) -> None:
    # Find a scripted AutoSearch trajectory with two searches: three turns, three step rewards.
    rng = random.Random(1)
    while True:
        state = rng.getstate()
        parts, judgements = scripted_parts("autosearch", rng, "Paris")
        if sum(not is_model for _, is_model in parts) == 2:
            break
    rollout_fn = ScriptedSearchRollout("autosearch", tokenizer)
    rollout_fn.rng.setstate(state)
    [rollout] = rollout_fn([RolloutRequest("Q?", {"golden_answers": ["Paris"]}, 0)], None)
    reward = score("autosearch", rollout.text, ["Paris"], judgements=judgements).reward
    assert len(reward.step_rewards) == 3

    placed, aligned = token_rewards(reward.step_rewards, rollout.env_mask)

    # Independently: the index of the last token of each policy segment.
    ends, position = [], 0
    for segment in rollout.segments:
        position += len(segment.token_ids)
        if segment.is_model:
            ends.append(position - 1)
    assert aligned
    assert [i for i, r in enumerate(placed) if r != 0.0] == [
        e for e, r in zip(ends, reward.step_rewards, strict=True) if r
    ]
    assert [placed[e] for e in ends] == pytest.approx(list(reward.step_rewards))
    assert sum(placed) == pytest.approx(reward.total)
    # The first two turns end on the closing '>' of </search>; the last on the policy's EOS.
    assert [tokenizer.decode(rollout.completion_ids[e]) for e in ends[:2]] == [">", ">"]
    assert rollout.completion_ids[ends[2]] == tokenizer.eos_token_id


def test_it_gives_process_supervised_advantages_as_suffix_sums() -> None:
    # Group: rollout A's steps reward 1 then 0, rollout B's single step 0 → pooled [1, 0, 0],
    # mean 1/3, std √2/3, normalised 1 → √2, 0 → −1/√2.
    [a, b] = process_supervision_advantages([[1.0, 0.0], [0.0]], [[1, 0, 1], [1]])
    half = 2**-0.5
    assert a == pytest.approx([2**0.5 - half, 0.0, -half])  # token 0 collects both steps' rewards
    assert b == pytest.approx([-half])


def test_it_gives_zero_advantages_to_unscorable_rollouts_and_constant_groups() -> None:
    assert process_supervision_advantages([None, [1.0]], [[1, 1], [1]]) == [[0.0, 0.0], [0.0]]
    assert process_supervision_advantages([[0.5], [0.5]], [[1], [1]]) == [[0.0], [0.0]]
