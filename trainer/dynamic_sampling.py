"""DAPO's dynamic sampling for GRPO (``training.dynamic_sampling``): replace groups without reward spread.

GRPO normalises each reward within its group (the ``num_generations`` rollouts of one question). A group whose
rewards are all equal gets advantage 0 for every rollout and so no gradient. DAPO (Yu et al., 2025) drops
such groups and samples more questions until the batch is full of groups with spread. In experiment #2's pilot most
groups were flat (no rollout answered correctly), so HiPRAG's process bonus, gated by a correct answer, never
reached the gradient (docs/experiment.md, "Dynamic sampling (DAPO)").

After a generation batch is rolled out, :class:`DynamicSampler` scores each group with the trainer's own reward
function (:meth:`trainer.rewards.MethodReward.score_samples`, the columns TRL will pass it) and, for every flat group,
draws a question of the training set that is not in the batch (seeded by the run's seed and the step), rolls out
``num_generations`` completions for it and puts them in the flat group's place if their rewards differ. Groups still
flat get another round, up to ``training.dynamic_sampling_max_draws`` rounds; then the step trains on what it has.
The batch keeps its size, so TRL's batch shapes, group boundaries (``index // num_generations``) and learning-rate
schedule are unchanged; a step costs up to ``max_draws × groups × num_generations`` extra rollouts.

**Spare groups** (``training.dynamic_sampling_spare_groups``). Each redraw round is a rollout call of its own, made
after the batch's: on the H100 run a step with one round took 16.6 s against 9.5 s without (docs/benchmarks_training.md,
"Dynamic sampling"). So :meth:`DynamicSampler.sample` draws ``spare_groups`` questions first and rolls them out in the
batch's own call. The batch's groups with spread keep their places; its flat groups' places, in order, take the spare
groups with spread, in the order drawn; a spare left over (flat, or not needed) is dropped. Only groups still flat
after that go through the sequential rounds above. The cost moves from time to rollouts: ``spare_groups ×
num_generations`` more a step, in the call that is made anyway. ``max_draws`` = 0 (measure only) rolls no spares.

**Why inside the rollout function.** TRL 1.16 chooses the batch's dataset rows before calling ``rollout_func`` and
offers no hook to swap them afterwards. ``GRPOTrainer._generate_and_score_completions`` does, however, merge every
per-completion list the rollout function returns into those rows (``inp[key] = values[i]``) before
``_calculate_rewards`` turns the rows' columns into the reward functions' keyword arguments, and it trains on the
``prompt_ids`` the rollout function returns, not on its own tokenisation. So the rollout function returns each
completion's own row (:func:`trainer.rollout.row_columns`): a substituted group is scored against its replacement
question's golds and metadata, and its tokens follow the replacement's prompt. Only TRL's ``prompts`` argument (and its
optional completions table) still name the sampled question; the reward adapter reads ``rollout_prompt`` instead.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainer.rewards import MethodReward, ScoreLedger, has_spread
from trainer.rollout import (
    TRL_COLUMNS,
    Rollout,
    RolloutFn,
    RolloutRequest,
    rollout_columns,
    row_columns,
    run_rollout,
)

Scorer = Callable[[Sequence[RolloutRequest], Sequence[Rollout], Any], list[float | None]]
"""(requests, their rollouts, TRL's trainer state) → each rollout's reward total, ``None`` where unscorable."""


def reward_scorer(reward: MethodReward) -> Scorer:
    """Score rollouts as TRL will: the rollout's columns over the rows' (TRL's merge order), the trainer's state
    (TIRESRAG's a_t schedule reads it), through the very reward object the trainer holds, without recording."""

    def score(
        requests: Sequence[RolloutRequest], rollouts: Sequence[Rollout], state: Any
    ) -> list[float | None]:
        columns: dict[str, Any] = {**row_columns(requests), **rollout_columns(rollouts)}
        for key in TRL_COLUMNS:  # what TRL keeps for itself
            columns.pop(key, None)
        prompts = [r.prompt for r in requests]
        scores = reward.score_samples(prompts, [r.text for r in rollouts], trainer_state=state, **columns)
        return [None if s.reward is None else s.reward.total for s in scores]

    return score


def aligned_groups(requests: Sequence[RolloutRequest], group_size: int) -> int | None:
    """The number of GRPO groups in a batch, or ``None`` when the batch does not split into runs of ``group_size``
    equal prompts (a group cut between processes): such a batch is left as it is."""
    if group_size < 1 or not requests or len(requests) % group_size:
        return None
    for start in range(0, len(requests), group_size):
        if len({r.prompt for r in requests[start : start + group_size]}) != 1:
            return None
    return len(requests) // group_size


@dataclasses.dataclass
class _Draws:
    """A step's seeded draws among the questions not yet rolled out this step (never the same question twice)."""

    rng: random.Random
    candidates: list[str]

    def take(self, count: int) -> list[str]:
        drawn = self.rng.sample(self.candidates, min(count, len(self.candidates)))
        taken = set(drawn)
        self.candidates = [p for p in self.candidates if p not in taken]
        return drawn


@dataclasses.dataclass
class _Batch:
    """The generation batch being filled: its requests and rollouts, and the places of its groups still flat."""

    requests: list[RolloutRequest]
    rollouts: list[Rollout]
    flat: list[int]
    group_size: int

    def put(self, slot: int, requests: Sequence[RolloutRequest], rollouts: Sequence[Rollout]) -> None:
        """Another question's group in flat group ``slot``'s place, its requests renumbered to the place."""
        g = self.group_size
        self.requests[slot * g : (slot + 1) * g] = [
            dataclasses.replace(r, index=slot * g + j) for j, r in enumerate(requests)
        ]
        self.rollouts[slot * g : (slot + 1) * g] = rollouts
        self.flat.remove(slot)


class DynamicSampler:
    """Replace flat groups of a generation batch by groups of fresh questions with reward spread (module docstring).

    ``rows`` is the training dataset (each with its ``prompt``); ``ledger`` receives the step's
    ``groups/spread_rate_before``, ``groups/dynamic_draws``, ``groups/redraw_rounds``, ``groups/spare_groups_used``
    and ``groups/spare_groups_dropped`` for the trainer to log beside ``groups/spread_rate``; ``progress`` (a
    :class:`trainer.progress.ProgressReporter`, optional) notes the draws in the heartbeat. ``spare_groups``: questions
    rolled out with the batch in its own call (:meth:`sample`), 0 for none.
    """

    def __init__(
        self,
        score: Scorer,
        rows: Sequence[Mapping[str, Any]],
        *,
        group_size: int,
        max_draws: int,
        seed: int,
        ledger: ScoreLedger,
        progress: Any = None,
        spare_groups: int = 0,
    ) -> None:
        if spare_groups < 0:
            raise ValueError(f"spare_groups must be ≥ 0, got {spare_groups}")
        self.score = score
        self.pool = {
            str(row["prompt"]): row for row in rows
        }  # one per prompt, as make_rollout_func finds rows
        self.group_size = group_size
        self.max_draws = max_draws
        self.seed = seed
        self.ledger = ledger
        self.progress = progress
        self.spare_groups = spare_groups

    def sample(
        self,
        requests: Sequence[RolloutRequest],
        rollout: RolloutFn,
        policy: Any,
        *,
        state: Any = None,
        stream: int = 0,
    ) -> tuple[list[RolloutRequest], list[Rollout]]:
        """Roll out the batch, with ``spare_groups`` drawn questions in the same call, and fill its flat groups
        (spares first, then :meth:`fill`'s sequential rounds). Without spares this is ``run_rollout`` then
        :meth:`fill`, draw for draw."""
        requests = list(requests)
        aligned = aligned_groups(requests, self.group_size) is not None
        count = self.spare_groups if aligned and self.max_draws > 0 else 0
        if not count:
            return self.fill(
                requests, run_rollout(rollout, requests, policy), rollout, policy, state=state, stream=stream
            )
        draws = self._draws(requests, state, stream)
        g, size = self.group_size, len(requests)
        spares = [
            RolloutRequest(prompt=prompt, row=self.pool[prompt], index=size + s * g + j)
            for s, prompt in enumerate(draws.take(count))
            for j in range(g)
        ]
        rollouts = self._roll(rollout, requests + spares, policy, self._spares_note(len(spares) // g))
        return self._fill(
            requests,
            rollouts[:size],
            rollout,
            policy,
            state=state,
            draws=draws,
            spares=(spares, rollouts[size:]),
        )

    def fill(
        self,
        requests: Sequence[RolloutRequest],
        rollouts: Sequence[Rollout],
        rollout: RolloutFn,
        policy: Any,
        *,
        state: Any = None,
        stream: int = 0,
    ) -> tuple[list[RolloutRequest], list[Rollout]]:
        """The batch with its flat groups replaced where a drawn question's group has spread. ``state`` is TRL's
        trainer state (its ``global_step`` seeds the draws with the run's seed); ``stream`` the process index, so
        processes draw apart."""
        draws = self._draws(requests, state, stream)
        return self._fill(requests, rollouts, rollout, policy, state=state, draws=draws, spares=([], []))

    def _draws(self, requests: Sequence[RolloutRequest], state: Any, stream: int) -> _Draws:
        step = int(getattr(state, "global_step", 0) or 0)
        rng = random.Random(f"{self.seed}:{step}:{stream}")  # a str seed: the same draws in every process run
        in_batch = {r.prompt for r in requests}
        return _Draws(rng, [prompt for prompt in self.pool if prompt not in in_batch])

    def _fill(
        self,
        requests: Sequence[RolloutRequest],
        rollouts: Sequence[Rollout],
        rollout: RolloutFn,
        policy: Any,
        *,
        state: Any,
        draws: _Draws,
        spares: tuple[Sequence[RolloutRequest], Sequence[Rollout]],
    ) -> tuple[list[RolloutRequest], list[Rollout]]:
        requests, rollouts = list(requests), list(rollouts)
        n_groups = aligned_groups(requests, self.group_size)
        if n_groups is None:
            return requests, rollouts
        g = self.group_size
        # The sampled batch is scored as TRL would score it; the spares and each round's candidates as batches of
        # their own. Only HiPRAG's over-/under-only ablations read the batch (Sec. 5.3's average bonus), so there
        # TRL's final call over the filled batch can give a candidate slightly other totals than here:
        # groups/spread_rate, computed from TRL's call, is the figure that counts. A judge the reward calls itself
        # (MethodReward.judge) is called here too; the trainer's rollouts bring their judgements along, so theirs
        # are not.
        totals = self.score(requests, rollouts, state)
        flat = [k for k in range(n_groups) if not has_spread(totals[k * g : (k + 1) * g])]
        spread_before = n_groups - len(flat)
        batch = _Batch(requests, rollouts, flat, g)
        used = self._place_spares(batch, *spares, state=state) if flat and spares[0] else 0
        redrawn, rounds = self._redraw(batch, draws, rollout, policy, state)
        self.ledger.sampling = {
            "groups/spread_rate_before": spread_before / n_groups,
            "groups/dynamic_draws": float(redrawn),
            "groups/redraw_rounds": float(rounds),
            "groups/spare_groups_used": float(used),
            "groups/spare_groups_dropped": float(len(spares[0]) // g - used),
        }
        if (redrawn or spares[0]) and self.progress is not None:
            self.progress.update("update", 0, 0, "scoring rewards, then the policy update")
        return batch.requests, batch.rollouts

    def _place_spares(
        self, batch: _Batch, requests: Sequence[RolloutRequest], rollouts: Sequence[Rollout], *, state: Any
    ) -> int:
        """Put the spare groups with spread, in the order drawn, in the flat groups' places, in order; how many."""
        g = self.group_size
        totals = self.score(requests, rollouts, state)
        used = 0
        for s in range(len(requests) // g):
            if not batch.flat:
                break
            if has_spread(totals[s * g : (s + 1) * g]):
                batch.put(batch.flat[0], requests[s * g : (s + 1) * g], rollouts[s * g : (s + 1) * g])
                used += 1
        return used

    def _redraw(
        self, batch: _Batch, draws: _Draws, rollout: RolloutFn, policy: Any, state: Any
    ) -> tuple[int, int]:
        """Today's sequential rounds for the groups still flat, up to ``max_draws``: (questions drawn, rounds)."""
        g = self.group_size
        drawn_total = rounds = 0
        for round_ in range(1, self.max_draws + 1):
            if not batch.flat or not draws.candidates:
                break
            drawn = draws.take(len(batch.flat))
            targets = batch.flat[: len(drawn)]
            new_requests = [
                RolloutRequest(prompt=prompt, row=self.pool[prompt], index=k * g + j)
                for k, prompt in zip(targets, drawn, strict=True)
                for j in range(g)
            ]
            new_rollouts = self._roll(rollout, new_requests, policy, self._round_note(len(drawn), round_))
            drawn_total += len(drawn)
            rounds += 1
            new_totals = self.score(new_requests, new_rollouts, state)
            for i, k in enumerate(targets):
                if has_spread(new_totals[i * g : (i + 1) * g]):
                    batch.put(k, new_requests[i * g : (i + 1) * g], new_rollouts[i * g : (i + 1) * g])
        return drawn_total, rounds

    def _round_note(self, groups: int, round_: int) -> str:
        return (
            f"drawing {groups} replacement group{'s' if groups != 1 else ''} "
            f"(dynamic sampling, round {round_} of {self.max_draws})"
        )

    @staticmethod
    def _spares_note(groups: int) -> str:
        return f"with {groups} spare group{'s' if groups != 1 else ''} (dynamic sampling)"

    def _roll(
        self, rollout: RolloutFn, requests: list[RolloutRequest], policy: Any, note: str
    ) -> list[Rollout]:
        if self.progress is not None:
            self.progress.note = note  # kept in every detail the rollout reports meanwhile (turns, retrieval)
            self.progress.update("generate", 0, len(requests), "")
        try:
            return run_rollout(rollout, requests, policy)
        finally:
            if self.progress is not None:
                self.progress.note = ""
