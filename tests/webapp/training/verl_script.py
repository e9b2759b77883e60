"""Run with veRL 0.9.1's code on PYTHONPATH (test_verl.py): veRL's reward managers call trainer.verl_reward, and
veRL's own dump writer and file logger write a two-step run's files.

    python verl_script.py OUT_DIR

Prints one JSON object: the rewards veRL's managers computed and where the files are.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch

HIPRAG = (
    "<think>\n<step>\n    <reasoning>Look up.</reasoning>\n    <search>capital of France</search>\n"
    "    <context>Doc 1(Title: Paris) Paris is the capital of France.</context>\n"
    "    <conclusion>It says Paris.</conclusion>\n</step>\n<step>\n    <reasoning>I know it.</reasoning>\n"
    "    <conclusion>It is Paris.</conclusion>\n</step>\n</think>\n<answer>Paris</answer>"
)
WRONG = "<think>\n<step>\n    <reasoning>Guess.</reasoning>\n    <conclusion>Lyon.</conclusion>\n</step>\n</think>\n<answer>Lyon</answer>"
BROKEN = "Paris, I think."
QUESTION = "What is the capital of France?"


class ByteTokenizer:
    """What veRL's managers use of a tokenizer: decode."""

    def decode(self, ids, skip_special_tokens=True):  # type: ignore[no-untyped-def]
        return bytes(int(i) for i in ids if int(i) > 0).decode("utf-8", errors="replace")

    def batch_decode(self, rows, skip_special_tokens=True):  # type: ignore[no-untyped-def]
        return [self.decode(row) for row in rows]


def batch(texts: list[str]):  # type: ignore[no-untyped-def]
    from verl import DataProto

    prompt = list(QUESTION.encode())
    width = max(len(t.encode()) for t in texts)
    prompts = torch.tensor([prompt] * len(texts))
    responses = torch.zeros(len(texts), width, dtype=torch.long)
    mask = torch.zeros(len(texts), len(prompt) + width, dtype=torch.long)
    mask[:, : len(prompt)] = 1
    for i, text in enumerate(texts):
        ids = list(text.encode())
        responses[i, : len(ids)] = torch.tensor(ids)
        mask[i, len(prompt) : len(prompt) + len(ids)] = 1
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": mask},
        non_tensors={
            "data_source": np.array(["nq"] * len(texts), dtype=object),
            "reward_model": np.array([{"ground_truth": {"target": ["Paris"]}}] * len(texts), dtype=object),
            "extra_info": np.array(
                [{"question": QUESTION, "index": i} for i in range(len(texts))], dtype=object
            ),
        },
    )


def main() -> int:
    out = Path(sys.argv[1])
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils.tracking import FileLogger
    from verl.workers.reward_manager.batch import BatchRewardManager
    from verl.workers.reward_manager.naive import NaiveRewardManager

    from trainer.verl_reward import compute_score, compute_score_batch

    texts = [HIPRAG, WRONG, BROKEN, HIPRAG]
    tokenizer = ByteTokenizer()
    naive = NaiveRewardManager(tokenizer, 0, compute_score=functools.partial(compute_score, method="hiprag"))
    naive_result = naive(batch(texts), return_dict=True)
    batched = BatchRewardManager(
        tokenizer, 0, compute_score=compute_score_batch, method="hiprag", judge="evidence"
    )
    batch_result = batched(batch(texts), return_dict=True)
    reference = NaiveRewardManager(
        tokenizer, 0, compute_score=functools.partial(compute_score, method="hiprag", mode="reference")
    )(batch(texts), return_dict=True)

    os.environ["VERL_FILE_LOGGER_PATH"] = str(out / "metrics.jsonl")
    metrics = FileLogger("searchlab", "verl-test")
    for step in (1, 2):
        extra = {k: list(v) for k, v in batch_result["reward_extra_info"].items()}
        scores = batch_result["reward_tensor"].sum(-1).tolist()
        # veRL's own writer (what _log_rollout_data hands it after decoding the batch), one file per step.
        RayPPOTrainer._write_generations(
            [QUESTION] * len(texts),
            texts,
            [{"target": ["Paris"]}] * len(texts),
            scores,
            extra,
            str(out / "rollouts"),
            step,
        )
        metrics.log({"critic/score/mean": float(np.mean(scores)), "actor/pg_loss": 0.1 * step}, step)
    metrics.finish()
    print(
        json.dumps(
            {
                "naive": naive_result["reward_tensor"].sum(-1).tolist(),
                "batch": batch_result["reward_tensor"].sum(-1).tolist(),
                "reference": reference["reward_tensor"].sum(-1).tolist(),
                "extra_keys": sorted(batch_result["reward_extra_info"]),
                "verl": __import__("verl").__version__,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
