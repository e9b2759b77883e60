"""Run with veRL 0.9.1's code on PYTHONPATH (test_verl.py): a batch through veRL's Reward Loop, the default reward
path of its ``RayPPOTrainer``, with HiPRAG's Sec. 5.3 ablation (``process=over_only``).

    python verl_reward_loop_script.py OUT_DIR

veRL's own classes do the work: ``AgentLoopManager.generate_sequences`` (the class named by
``actor_rollout_ref.rollout.agent.agent_loop_manager_class``, loaded with veRL's ``load_class_from_fqn``) splits the
batch over ``AgentLoopWorker``s, each runs an agent loop per sample and scores it through a ``RewardLoopWorker``
(``_compute_score``), whose reward manager veRL loads from ``reward.reward_manager`` and ``reward.custom_reward_
function`` (``load_reward_manager``). What stands in for a GPU run: the LLM (an agent loop that replays a fixed
response), the model (a byte-level tokenizer and a tiny random Llama config saved to OUT_DIR) and Ray (each actor is
a local object whose ``.remote`` arguments are pickled and unpickled, as Ray serialises them).

``deferred``: searchlab's manager pair (trainer.verl_reward_loop). ``plain``: veRL's own ``naive`` reward-loop
manager and ``AgentLoopManager`` with ``compute_score``, as a veRL user would configure it first.
Prints one JSON object, by mode: each sample's reward (the ``rm_scores`` row sum) and ``searchlab`` detail, or the
error veRL's trainer would get.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[3]
QUESTION = "What is the capital of France?"
SEARCH_CORRECT = (
    "<think>\n<step>\n    <reasoning>Look up.</reasoning>\n    <search>capital of France</search>\n"
    "    <context>Doc 1(Title: Paris) Paris is the capital of France.</context>\n"
    "    <conclusion>It says Paris.</conclusion>\n</step>\n</think>\n<answer>Paris</answer>"
)
NO_SEARCH_CORRECT = (
    "<think>\n<step>\n    <reasoning>I know it.</reasoning>\n    <conclusion>It is Paris.</conclusion>\n"
    "</step>\n</think>\n<answer>Paris</answer>"
)
REPEATED_SEARCH = (  # the second query repeats the first: over-search (evidence heuristic), bonus 0.4·1/2
    "<think>\n<step>\n    <reasoning>Look up.</reasoning>\n    <search>capital of France</search>\n"
    "    <context>Doc 1(Title: Paris) Paris is the capital of France.</context>\n"
    "    <conclusion>It says Paris.</conclusion>\n</step>\n<step>\n    <reasoning>Check again.</reasoning>\n"
    "    <search>capital of France</search>\n"
    "    <context>Doc 1(Title: Paris) Paris is the capital of France.</context>\n"
    "    <conclusion>Still Paris.</conclusion>\n</step>\n</think>\n<answer>Paris</answer>"
)
WRONG = (
    "<think>\n<step>\n    <reasoning>Guess.</reasoning>\n    <conclusion>Lyon.</conclusion>\n</step>\n</think>\n"
    "<answer>Lyon</answer>"
)
# two prompts × three rollouts, interleaved as veRL repeats them; the batch is split over two agent-loop workers,
# so each prompt's group sits on its own worker and only the manager sees both
RESPONSES = [SEARCH_CORRECT, NO_SEARCH_CORRECT, WRONG, REPEATED_SEARCH, NO_SEARCH_CORRECT, WRONG]


class LocalActor:
    """A Ray actor handle's surface on a local object: ``handle.method.remote(*args)`` is awaitable and gets
    copies of its arguments (pickled, as Ray passes them)."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name)

        class _Remote:
            @staticmethod
            def remote(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = pickle.loads(pickle.dumps((args, kwargs)))
                return method(*args, **kwargs)

        return _Remote()


def _config(out: Path, mode: str) -> Any:
    from omegaconf import OmegaConf, open_dict

    from trainer.models import tiny_model, tiny_tokenizer

    model_dir = out / "tiny"
    tokenizer = tiny_tokenizer()
    tokenizer.save_pretrained(model_dir)
    model_config = tiny_model(tokenizer).config
    model_config.architectures = ["LlamaForCausalLM"]
    model_config.save_pretrained(model_dir)
    config = OmegaConf.load(
        Path(__import__("verl").__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    )
    with open_dict(config):
        config.actor_rollout_ref.model.path = str(model_dir)
        rollout = config.actor_rollout_ref.rollout
        rollout.name = "vllm"  # a name only: no server is started
        rollout.prompt_length, rollout.response_length, rollout.n = 512, 1024, 3
        rollout.agent.num_workers = 2
        rollout.agent.default_agent_loop = "searchlab_replay"
        config.reward.num_workers = 2
        config.reward.custom_reward_function.path = str(REPO / "trainer" / "verl_reward.py")
        config.reward.custom_reward_function.name = "compute_score"
        config.reward.custom_reward_function.reward_kwargs = {
            "method": "hiprag",
            "params": {"process": "over_only"},
        }
        if mode == "deferred":
            rollout.agent.agent_loop_manager_class = "trainer.verl_reward_loop.SearchlabAgentLoopManager"
            config.reward.reward_manager.source = "importlib"
            config.reward.reward_manager.name = "SearchlabRewardManager"
            config.reward.reward_manager.module.path = str(REPO / "trainer" / "verl_reward_loop.py")
    return config


def _register_replay_loop() -> None:
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )

    class ReplayAgentLoop(AgentLoopBase):  # type: ignore[misc]
        """The LLM's part: the prompt's tokens, then the response this sample's ``extra_info`` names."""

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
            prompt_ids = self.tokenizer.encode(kwargs["raw_prompt"][0]["content"])
            response_ids = self.tokenizer.encode(kwargs["extra_info"]["response"])
            return AgentLoopOutput(
                prompt_ids=prompt_ids,
                response_ids=response_ids,
                response_mask=[1] * len(response_ids),
                num_turns=2,
                metrics=AgentLoopMetrics(),
            )

    # hydra instantiates registered loops by module and qualified name: make it a global of this module
    ReplayAgentLoop.__qualname__ = "ReplayAgentLoop"
    globals()["ReplayAgentLoop"] = ReplayAgentLoop
    register("searchlab_replay")(ReplayAgentLoop)


def _prompts() -> Any:
    from verl import DataProto

    n = len(RESPONSES)
    return DataProto.from_dict(
        non_tensors={
            "raw_prompt": np.array([[{"role": "user", "content": QUESTION}]] * n, dtype=object),
            "data_source": np.array(["nq"] * n, dtype=object),
            "reward_model": np.array([{"ground_truth": {"target": ["Paris"]}}] * n, dtype=object),
            "extra_info": np.array(
                [{"question": QUESTION, "index": i // 3, "response": r} for i, r in enumerate(RESPONSES)],
                dtype=object,
            ),
            "uid": np.array([f"q{i // 3}" for i in range(n)], dtype=object),
        },
        meta_info={"global_steps": 1, "validate": False},
    )


async def main(out: Path, mode: str) -> dict[str, Any]:
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.utils.import_utils import load_class_from_fqn

    config = _config(out, mode)
    _register_replay_loop()
    reward_workers = [LocalActor(RewardLoopWorker(config)) for _ in range(config.reward.num_workers)]
    manager_name = config.actor_rollout_ref.rollout.agent.get("agent_loop_manager_class")
    if manager_name:
        manager_class = load_class_from_fqn(manager_name, "AgentLoopManager")
    else:
        from verl.experimental.agent_loop import AgentLoopManager as manager_class
    manager = manager_class(config, llm_client=None, reward_loop_worker_handles=reward_workers)
    manager.agent_loop_workers = [  # _init_agent_loop_workers without Ray
        LocalActor(AgentLoopWorker(config, None, None, reward_workers))
        for _ in range(config.actor_rollout_ref.rollout.agent.num_workers)
    ]
    try:
        output = await manager.generate_sequences(_prompts())
    except Exception as exc:  # what veRL's trainer would raise
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "manager": type(manager).__name__,
        "reward_manager": type(reward_workers[0]._target.reward_manager).__name__,
        "rewards": output.batch["rm_scores"].sum(-1).tolist(),
        "details": [json.loads(d) for d in output.non_tensor_batch["searchlab"]],
        "reward_extra_keys": output.meta_info.get("reward_extra_keys"),
    }


async def both(out: Path) -> dict[str, Any]:
    return {mode: await main(out, mode) for mode in ("deferred", "plain")}


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    print(json.dumps(asyncio.run(both(Path(sys.argv[1])))))
