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


class DynamicSampler:
    """Replace flat groups of a generation batch by groups of fresh questions with reward spread (module docstring).

    ``rows`` is the training dataset (each with its ``prompt``); ``ledger`` receives the step's
    ``groups/dynamic_draws`` and ``groups/spread_rate_before`` for the trainer to log beside ``groups/spread_rate``;
    ``progress`` (a :class:`trainer.progress.ProgressReporter`, optional) notes the draws in the heartbeat.
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
    ) -> None:
        self.score = score
        self.pool = {
            str(row["prompt"]): row for row in rows
        }  # one per prompt, as make_rollout_func finds rows
        self.group_size = group_size
        self.max_draws = max_draws
        self.seed = seed
        self.ledger = ledger
        self.progress = progress

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
        requests, rollouts = list(requests), list(rollouts)
        n_groups = aligned_groups(requests, self.group_size)
        if n_groups is None:
            return requests, rollouts
        g = self.group_size
        # The sampled batch is scored as TRL would score it; each round's candidates as a batch of their own. Only
        # HiPRAG's over-/under-only ablations read the batch (Sec. 5.3's average bonus), so there TRL's final call
        # over the filled batch can give a candidate slightly other totals than here: groups/spread_rate, computed
        # from TRL's call, is the figure that counts. A judge the reward calls itself (MethodReward.judge) is called
        # here too; the trainer's rollouts bring their judgements along, so theirs are not.
        totals = self.score(requests, rollouts, state)
        flat = [k for k in range(n_groups) if not has_spread(totals[k * g : (k + 1) * g])]
        spread_before = n_groups - len(flat)
        step = int(getattr(state, "global_step", 0) or 0)
        rng = random.Random(f"{self.seed}:{step}:{stream}")  # a str seed: the same draws in every process run
        in_batch = {r.prompt for r in requests}
        candidates = [prompt for prompt in self.pool if prompt not in in_batch]
        draws = 0
        for round_ in range(1, self.max_draws + 1):
            if not flat or not candidates:
                break
            drawn = rng.sample(candidates, min(len(flat), len(candidates)))
            taken = set(drawn)
            candidates = [p for p in candidates if p not in taken]  # never the same question twice a step
            targets = flat[: len(drawn)]
            new_requests = [
                RolloutRequest(prompt=prompt, row=self.pool[prompt], index=k * g + j)
                for k, prompt in zip(targets, drawn, strict=True)
                for j in range(g)
            ]
            new_rollouts = self._roll(rollout, new_requests, policy, round_)
            draws += len(drawn)
            new_totals = self.score(new_requests, new_rollouts, state)
            for i, k in enumerate(targets):
                if has_spread(new_totals[i * g : (i + 1) * g]):
                    requests[k * g : (k + 1) * g] = new_requests[i * g : (i + 1) * g]
                    rollouts[k * g : (k + 1) * g] = new_rollouts[i * g : (i + 1) * g]
                    flat.remove(k)
        self.ledger.sampling = {
            "groups/spread_rate_before": spread_before / n_groups,
            "groups/dynamic_draws": float(draws),
        }
        if draws and self.progress is not None:
            self.progress.update("update", 0, 0, "scoring rewards, then the policy update")
        return requests, rollouts

    def _roll(
        self, rollout: RolloutFn, requests: list[RolloutRequest], policy: Any, round_: int
    ) -> list[Rollout]:
        groups = len(requests) // self.group_size
        note = (
            f"drawing {groups} replacement group{'s' if groups != 1 else ''} "
            f"(dynamic sampling, round {round_} of {self.max_draws})"
        )
        if self.progress is not None:
            self.progress.note = note  # kept in every detail the rollout reports meanwhile (turns, retrieval)
            self.progress.update("generate", 0, len(requests), "")
        try:
            return run_rollout(rollout, requests, policy)
        finally:
            if self.progress is not None:
                self.progress.note = ""
