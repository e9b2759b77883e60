"""searchlab's rewards under veRL's Reward Loop (veRL 0.9.1's default reward path), HiPRAG's batch average included.

In veRL 0.9.1 ``RayPPOTrainer`` computes every reward through ``verl.experimental.reward_loop``: with no reward model
(searchlab's case: rule rewards, judges by URL) each rollout is scored as soon as it finishes, inside the agent loop,
by one of ``reward.num_workers`` ``RewardLoopWorker`` actors chosen at random, one sample per ``run_single``. No
reward manager there sees the batch, nor even the prompt's group. HiPRAG's Sec. 5.3 ablations need the batch: "If a
trajectory contains zero steps of the evaluated type, we set the process bonus to the average bonus within the
current training batch". The batch exists in one place: ``AgentLoopManager.generate_sequences``, which gathers the
agent-loop workers' outputs (``rm_scores`` and each sample's ``reward_extra_info``) before the trainer reads them
(``extract_reward``); veRL loads that class from ``actor_rollout_ref.rollout.agent.agent_loop_manager_class``.

So the bonus is split where veRL splits the work:

* :class:`SearchlabRewardManager` (a reward-loop manager, ``reward.reward_manager.source=importlib``) scores each
  sample with :func:`trainer.verl_reward.compute_score` in ``deferred`` mode: a sample owed the batch average is
  scored without it and marked pending; one that earned a bonus reports it;
* :class:`SearchlabAgentLoopManager` (veRL's ``AgentLoopManager``) adds the average of the earned bonuses to each
  pending sample's last-token reward and rewrites its ``searchlab`` detail, for training and validation batches.

Without the agent-loop manager the reward manager scores in ``refuse`` mode: an ablation then fails with
:class:`trainer.verl_reward.BatchBonusUnavailable` instead of training on a bonus of 0. Everything else (every method,
paper and reference mode) needs neither class: ``compute_score`` is a valid Reward Loop reward function as it is.

    +actor_rollout_ref.rollout.agent.agent_loop_manager_class=trainer.verl_reward_loop.SearchlabAgentLoopManager
    reward.reward_manager.source=importlib reward.reward_manager.name=SearchlabRewardManager
    reward.reward_manager.module.path=trainer/verl_reward_loop.py
    reward.custom_reward_function.path=trainer/verl_reward.py reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.method=hiprag
    +reward.custom_reward_function.reward_kwargs.params.process=over_only

veRL is imported only when one of the two classes is asked for (module ``__getattr__``), so this module imports
without veRL, and the batch arithmetic (:func:`trainer.verl_reward.apply_batch_average`) is plain Python.
"""

from __future__ import annotations

import functools
from typing import Any

from trainer.verl_reward import apply_batch_average

AGENT_LOOP_MANAGER = "trainer.verl_reward_loop.SearchlabAgentLoopManager"


def _batch_is_finished_by_us(config: Any) -> bool:
    """True when veRL will run :class:`SearchlabAgentLoopManager` and stream rewards through the agent loop."""
    try:
        manager = config.actor_rollout_ref.rollout.agent.get("agent_loop_manager_class")
    except AttributeError:
        return False
    reward_model = config.reward.get("reward_model") or {}
    colocated = bool(reward_model.get("enable")) and not bool(reward_model.get("enable_resource_pool"))
    # With a colocated reward model veRL scores after the agent loop (RewardLoopManager.compute_rm_score): the
    # agent-loop manager never sees rewards, so nothing would fill a pending bonus; refuse there instead.
    return manager == AGENT_LOOP_MANAGER and not colocated


def finish_batch(output: Any) -> Any:
    """HiPRAG Sec. 5.3 on a veRL ``DataProto`` from the agent loop: each pending sample's ``rm_scores`` (at its last
    response token, where veRL put the score) gets the batch's average earned bonus; ``searchlab`` and ``score``
    (its ``reward_extra_info``) follow. A batch without rewards or without searchlab details is returned as is."""
    batch, extra = output.batch, output.non_tensor_batch
    if "rm_scores" not in batch.keys() or "searchlab" not in extra:  # noqa: SIM118 (TensorDict refuses `in`)
        return output
    rm_scores = batch["rm_scores"]
    totals = rm_scores.sum(dim=-1).tolist()
    scores, details = apply_batch_average(totals, list(extra["searchlab"]))
    changed = [i for i, (old, new) in enumerate(zip(totals, scores, strict=True)) if new != old]
    if not changed:
        return output
    prompt_length = batch["prompts"].size(1)
    last = batch["attention_mask"][:, prompt_length:].sum(dim=1) - 1
    # veRL stacks reward_extra_info with np.array: a fixed-width string array that would cut a longer detail
    extra["searchlab"] = extra["searchlab"].astype(object)
    if "score" in extra:
        extra["score"] = extra["score"].astype(float)
    for i in changed:
        rm_scores[i, int(last[i])] += scores[i] - totals[i]
        extra["searchlab"][i] = details[i]
        if "score" in extra:
            extra["score"][i] = scores[i]
    return output


@functools.cache
def _reward_manager_class() -> type:
    from verl.experimental.reward_loop.reward_manager.naive import (  # type: ignore[import-not-found]
        NaiveRewardManager,
    )

    class SearchlabRewardManager(NaiveRewardManager):  # type: ignore[misc]
        """veRL's reward-loop ``naive`` manager, asking :func:`trainer.verl_reward.compute_score` to defer HiPRAG's
        batch average when :class:`SearchlabAgentLoopManager` will fill it, and to refuse it otherwise."""

        def __init__(self, config: Any, tokenizer: Any, compute_score: Any, **kwargs: Any) -> None:
            super().__init__(config, tokenizer, compute_score, **kwargs)
            mode = "deferred" if _batch_is_finished_by_us(config) else "refuse"
            self.compute_score: Any = functools.partial(self.compute_score, batch_bonus=mode)
            self.batch_bonus = mode

    return SearchlabRewardManager


@functools.cache
def _agent_loop_manager_class() -> type:
    from verl.experimental.agent_loop import AgentLoopManager  # type: ignore[import-not-found]
    from verl.utils.ray_utils import auto_await  # type: ignore[import-not-found]

    class SearchlabAgentLoopManager(AgentLoopManager):  # type: ignore[misc]
        """veRL's ``AgentLoopManager``: the batch's rollouts with their rewards, then :func:`finish_batch`."""

        @auto_await  # type: ignore[untyped-decorator]
        async def generate_sequences(self, prompts: Any) -> Any:
            return finish_batch(await super().generate_sequences(prompts))

    SearchlabAgentLoopManager.__module__ = __name__
    return SearchlabAgentLoopManager


def __getattr__(name: str) -> Any:
    if name == "SearchlabRewardManager":
        return _reward_manager_class()
    if name == "SearchlabAgentLoopManager":
        return _agent_loop_manager_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
