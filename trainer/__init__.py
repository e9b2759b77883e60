"""RL training of search agents over agent/: TRL GRPO with a rollout function, PPO with a critic. No Django."""
