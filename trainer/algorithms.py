"""GRPO and PPO over TRL 1.16's ``GRPOTrainer``: we configure it and replace only the advantages.

TRL generates through our ``rollout_func`` (environment tokens masked by ``env_mask``), scores with the reward
adapters and computes group-normalised advantages. :class:`SearchGRPOTrainer` then swaps those advantages where a
method defines its own:

* AutoSearch (``reward.token_level``): per-step rewards → token-level advantages by DeepSeekMath's process
  supervision (:mod:`trainer.token_rewards`), shape (B, T), which TRL's loss accepts as is;
* TIRESRAG (``reward.tiresrag_group_shaping``): ``scoring.rewards.tiresrag_group`` per group — group filter,
  consistency penalty, difficulty weight (paper §4.4). A dropped group gets advantage 0 and its tokens leave the loss
  mask, so it contributes neither policy gradient nor KL.

:class:`SearchPPOTrainer` adds a critic and replaces the advantages with GAE over policy tokens. The critic is a
**separate model** (a copy of the policy's backbone, or ``ppo.critic_model``, plus a linear value head), with its own
AdamW, not a value head on the policy: TRL's fused LM head returns per-token log-probs without hidden states, so a
shared head would cost a second policy forward anyway; a separate critic keeps value-loss gradients out of the policy
(and out of a LoRA adapter), and it is what Search-R1/AutoSearch's veRL PPO does (critic initialised from the same
checkpoint). PPO epochs are TRL's ``num_iterations``; the policy loss is TRL's clipped objective.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from scoring.rewards.tiresrag_group import tiresrag_group_advantages
from trainer.config import PPOConfig, RunConfig
from trainer.rewards import SampleScore, ScoreLedger, group_metrics
from trainer.token_rewards import group_step_stats, outcome_token_rewards, step_advantages, token_rewards

CRITIC_FILE = "critic.pt"


def grpo_args(config: RunConfig) -> GRPOConfig:
    """TRL's config from ours. CPU-safe: bf16 only on a GPU, no gradient checkpointing unless asked, no reporting."""
    t = config.training
    on_gpu = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=config.output_dir,
        max_steps=t.max_steps,
        learning_rate=t.learning_rate,
        lr_scheduler_type=t.lr_scheduler_type,
        per_device_train_batch_size=t.per_device_train_batch_size,
        num_generations=t.num_generations,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        num_iterations=t.num_iterations,
        max_completion_length=t.max_completion_length,
        beta=t.beta,
        epsilon=t.epsilon,
        temperature=t.temperature,
        loss_type=t.loss_type,
        max_grad_norm=t.max_grad_norm,
        logging_steps=t.logging_steps,
        save_strategy="steps" if t.save_steps else "no",
        save_steps=t.save_steps or 500,
        save_total_limit=t.save_total_limit,
        gradient_checkpointing=t.gradient_checkpointing,
        seed=t.seed,
        bf16=on_gpu and config.model.dtype == "bfloat16",
        use_cpu=not on_gpu,
        report_to=[],
        remove_unused_columns=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def _gather(scores: list[SampleScore], trainer: GRPOTrainer) -> list[SampleScore]:
    """Every process's scores in TRL's gather order (process-major), so groups line up with its reward rows."""
    if trainer.accelerator.num_processes == 1:
        return scores
    from accelerate.utils import gather_object

    return list(gather_object(scores))


def _policy_masks(output: dict[str, Any]) -> list[list[int]]:
    """Per local completion, its env mask cut to its length (1 = policy token)."""
    completion_mask = output["completion_mask"]
    tool_mask = output.get("tool_mask")
    masks = []
    for i in range(completion_mask.size(0)):
        length = int(completion_mask[i].sum())
        row = tool_mask[i, :length] if tool_mask is not None else torch.ones(length, dtype=torch.long)
        masks.append([int(v) for v in row.tolist()])
    return masks


class SearchGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages follow the reward method (see the module docstring)."""

    def __init__(
        self,
        *args: Any,
        ledger: ScoreLedger,
        method: str,
        token_level: bool = True,
        tiresrag_group_shaping: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.ledger = ledger
        self.method = method
        self.token_level = token_level
        self.tiresrag_group_shaping = tiresrag_group_shaping
        self.group_size = int(self.num_generations or 1)

    @property
    def training_mode(self) -> bool:
        return bool(getattr(self.model, "training", False))

    def _log_value(self, key: str, value: float) -> None:
        self._metrics["train" if self.training_mode else "eval"][key].append(float(value))

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        for key, value in self.ledger.take_sampling().items():
            self._log_value(key, value)  # dynamic sampling: groups/dynamic_draws, groups/spread_rate_before
        local = self.ledger.take_batch()
        if len(local) != output["completion_ids"].size(0):
            return output  # the reward function was not one of ours: keep TRL's advantages
        scores = _gather(local, self)
        start = self.accelerator.process_index * len(local)
        self._shape_advantages(output, scores, start)
        for key, value in group_metrics(self.method, scores, self.group_size).items():
            self._log_value(key, value)  # groups/spread_rate, groups/process_reordered_rate
        return output

    def _groups(self, scores: Sequence[SampleScore]) -> list[list[SampleScore]]:
        g = self.group_size
        return [list(scores[i : i + g]) for i in range(0, len(scores), g)]

    def _shape_advantages(self, output: dict[str, Any], scores: list[SampleScore], start: int) -> None:
        if self.method == "autosearch" and self.token_level:
            self._process_supervision(output, scores, start)
        elif self.method == "tiresrag" and self.tiresrag_group_shaping:
            self._tiresrag_groups(output, scores, start)

    def _process_supervision(self, output: dict[str, Any], scores: list[SampleScore], start: int) -> None:
        masks = _policy_masks(output)
        advantages = torch.zeros(output["completion_ids"].shape, dtype=torch.float32)
        misaligned = 0
        for g, group in enumerate(self._groups(scores)):
            steps = [s.reward.step_rewards if s.reward is not None else None for s in group]
            mean, std = group_step_stats(steps)
            for j, rewards in enumerate(steps):
                i = g * self.group_size + j - start
                if not 0 <= i < len(masks):
                    continue
                row, aligned = step_advantages(rewards, masks[i], mean, std)
                misaligned += not aligned
                advantages[i, : len(row)] = torch.tensor(row)
        output["advantages"] = advantages.to(output["advantages"].device)
        self._log_value("token_rewards/misaligned", misaligned)

    def _tiresrag_groups(self, output: dict[str, Any], scores: list[SampleScore], start: int) -> None:
        advantages = torch.zeros(len(scores), dtype=torch.float32)
        keep = torch.ones(len(scores), dtype=torch.long)
        kept = 0
        weights: list[float] = []
        penalties: list[float] = []
        groups = self._groups(scores)
        for g, group in enumerate(groups):
            first = g * self.group_size
            rewards = [s.reward for s in group]
            # A judge outcome is missing: there are no group statistics to shape with.
            if any(r is None for r in rewards):
                keep[first : first + len(group)] = 0
                continue
            shaped = tiresrag_group_advantages([r for r in rewards if r is not None])
            weights.append(shaped.difficulty)
            if not shaped.kept:
                keep[first : first + len(group)] = 0
                continue
            kept += 1
            penalties.extend(shaped.penalties)
            advantages[first : first + len(group)] = torch.tensor(shaped.advantages)
        n_local = output["completion_ids"].size(0)
        local_keep = keep[start : start + n_local].to(output["completion_mask"].device)
        output["advantages"] = advantages[start : start + n_local].to(output["advantages"].device)
        tool_mask = output.get("tool_mask")
        if tool_mask is None:
            tool_mask = torch.ones_like(output["completion_mask"])
        output["tool_mask"] = tool_mask * local_keep.unsqueeze(1)
        self._log_value("tiresrag/kept_group_rate", kept / max(len(groups), 1))
        if weights:
            self._log_value("tiresrag/difficulty_weight", sum(weights) / len(weights))
        if penalties:
            self._log_value("tiresrag/consistency_penalty", sum(penalties) / len(penalties))


# ---------------------------------------------------------------------------------------------------- PPO


class ValueModel(nn.Module):
    """The critic: a transformer backbone and a linear value head, V(s_t) for every position."""

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.normal_(self.head.weight, std=1.0 / (hidden_size + 1) ** 0.5)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_policy(cls, policy: PreTrainedModel) -> ValueModel:
        """A copy of the policy's backbone (veRL initialises the critic from the policy's checkpoint)."""
        backbone = copy.deepcopy(policy.base_model).float()
        return cls(backbone, policy.config.get_text_config().hidden_size)

    @classmethod
    def from_pretrained(cls, path: str) -> ValueModel:
        backbone = AutoModel.from_pretrained(path, local_files_only=True, dtype=torch.float32)
        return cls(backbone, backbone.config.get_text_config().hidden_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False
        ).last_hidden_state
        values: torch.Tensor = self.head(hidden.float()).squeeze(-1)
        return values


def masked_gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over policy tokens only: (advantages, returns), each (B, T) and zero off the mask.

    The recursion runs backwards over the tokens where ``mask`` is 1 and skips every other token (retrieved text,
    padding): the "next state" of a policy token is the next *policy* token, so a retrieved span in between costs no
    discount step and its value estimate is never used. δ_t = r_t + γ·V(next) − V_t, Â_t = δ_t + γλ·Â_next, and after
    the last policy token V(next) = 0. Rewards on masked tokens are ignored (trainer.token_rewards never puts any
    there). Returns R_t = Â_t + V_t are the critic's targets. Search-R1's released trainer ran GAE over the plain
    attention mask instead (REFERENCE.md §c); skipping is what "retrieved tokens are not the policy's actions" implies.
    """
    batch, length = rewards.shape
    advantages = torch.zeros_like(rewards)
    next_value = torch.zeros(batch, dtype=rewards.dtype, device=rewards.device)
    next_advantage = torch.zeros_like(next_value)
    on = mask.bool()
    for t in range(length - 1, -1, -1):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantage = delta + gamma * lam * next_advantage
        advantages[:, t] = torch.where(on[:, t], advantage, torch.zeros_like(advantage))
        next_advantage = torch.where(on[:, t], advantage, next_advantage)
        next_value = torch.where(on[:, t], values[:, t], next_value)
    returns = (advantages + values) * mask
    return advantages, returns


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(x − mean) / std over the masked entries (unbiased std); unchanged when fewer than two entries."""
    on = mask.bool()
    if int(on.sum()) < 2:
        return values
    selected = values[on]
    whitened = (values - selected.mean()) / (selected.std() + 1e-8)
    return whitened * mask


class SearchPPOTrainer(SearchGRPOTrainer):
    """PPO: a separate critic, token rewards at step ends, GAE over policy tokens, a clipped value loss."""

    def __init__(self, *args: Any, ppo: PPOConfig, critic: ValueModel | None = None, **kwargs: Any) -> None:
        model = kwargs.get("model", args[0] if args else None)
        if critic is None:
            if ppo.critic_model:
                critic = ValueModel.from_pretrained(ppo.critic_model)
            elif isinstance(model, PreTrainedModel):
                critic = ValueModel.from_policy(model)
            else:
                raise TypeError("pass the policy as a model object, or ppo.critic_model, to build the critic")
        super().__init__(*args, **kwargs)
        self.ppo = ppo
        self.critic = critic.to(self.accelerator.device)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=ppo.critic_learning_rate)
        self._critic_micro_steps = 0

    def _values(self, batch: dict[str, Any]) -> torch.Tensor:
        """V(s_t) for each completion position t: the critic's output at the position just before token t."""
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        prompt_length, completion_length = batch["prompt_ids"].size(1), batch["completion_ids"].size(1)
        values: torch.Tensor = self.critic(input_ids, attention_mask)
        return values[:, prompt_length - 1 : prompt_length - 1 + completion_length]

    def _shape_advantages(self, output: dict[str, Any], scores: list[SampleScore], start: int) -> None:
        masks = _policy_masks(output)
        n_local = output["completion_ids"].size(0)
        rewards = torch.zeros(output["completion_ids"].shape, dtype=torch.float32)
        scorable = torch.ones(n_local, dtype=torch.long)
        misaligned = 0
        for i, score in enumerate(scores[start : start + n_local]):
            if score.reward is None:  # unscorable: neither the policy nor the critic learns from it
                scorable[i] = 0
                continue
            if self.token_level and score.reward.step_rewards:
                row, aligned = token_rewards(score.reward.step_rewards, masks[i])
                misaligned += not aligned
            else:
                row = outcome_token_rewards(score.reward.total, masks[i])
            rewards[i, : len(row)] = torch.tensor(row)
        device = output["completion_mask"].device
        tool_mask = output.get("tool_mask")
        if tool_mask is None:
            tool_mask = torch.ones_like(output["completion_mask"])
        output["tool_mask"] = tool_mask * scorable.to(device).unsqueeze(1)
        mask = (output["completion_mask"] * output["tool_mask"]).float()
        with torch.no_grad():
            values = self._values(output).float() * mask
        advantages, returns = masked_gae(rewards.to(device), values, mask, self.ppo.gamma, self.ppo.lam)
        if self.ppo.whiten_advantages:
            advantages = masked_whiten(advantages, mask)
        output["advantages"] = advantages
        output["old_values"] = values
        output["returns"] = returns
        self._log_value("token_rewards/misaligned", misaligned)
        self._log_value("ppo/returns_mean", float((returns * mask).sum() / mask.sum().clamp(min=1)))

    def compute_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> torch.Tensor:
        loss: torch.Tensor = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self.training_mode:
            self._critic_step(inputs)
        return loss

    def _critic_step(self, inputs: dict[str, Any]) -> None:
        """Clipped value loss ½·max((V−R)², (V_clip−R)²), V_clip = V_old + clip(V − V_old, ±c), over policy tokens.
        Its own backward and optimizer step (at the end of each gradient-accumulation window)."""
        mask = (inputs["completion_mask"] * inputs.get("tool_mask", 1)).float()
        values = self._values(inputs).float()
        old, returns = inputs["old_values"], inputs["returns"]
        c = self.ppo.cliprange_value
        clipped = old + (values - old).clamp(-c, c)
        losses = torch.max((values - returns) ** 2, (clipped - returns) ** 2)
        denominator = mask.sum().clamp(min=1.0)
        value_loss = 0.5 * (losses * mask).sum() / denominator
        accumulation = self.current_gradient_accumulation_steps
        (self.ppo.vf_coef * value_loss / accumulation).backward()
        self._critic_micro_steps += 1
        if self._critic_micro_steps % accumulation == 0:
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.args.max_grad_norm)
            self.critic_optimizer.step()
            self.critic_optimizer.zero_grad(set_to_none=True)
        clip_fraction = (((values - old).abs() > c).float() * mask).sum() / denominator
        self._log_value("ppo/value_loss", float(value_loss.detach()))
        self._log_value("ppo/value_clipfrac", float(clip_fraction))
        self._log_value("ppo/values_mean", float((values.detach() * mask).sum() / denominator))

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)  # type: ignore[no-untyped-call]
        folder = os.path.join(
            self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        if self.args.should_save:
            self.save_critic(os.path.join(folder, CRITIC_FILE))

    def save_critic(self, path: str) -> None:
        torch.save(
            {
                "critic": self.critic.state_dict(),
                "optimizer": self.critic_optimizer.state_dict(),
                "micro_steps": self._critic_micro_steps,
            },
            path,
        )

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)  # type: ignore[no-untyped-call]
        if checkpoint is None:
            return
        path = os.path.join(checkpoint, CRITIC_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: a PPO checkpoint without its critic cannot be resumed")
        state = torch.load(path, map_location=self.accelerator.device, weights_only=True)
        self.critic.load_state_dict(state["critic"])
        self.critic_optimizer.load_state_dict(state["optimizer"])
        self._critic_micro_steps = int(state["micro_steps"])
