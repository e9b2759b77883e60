"""Judge cost per training step: a short CPU training run of HiPRAG judged by an OpenAI-compatible endpoint.

    .venv/bin/python bench/judge_cost_training.py [--steps 4] [--output DIR]

The trainer is ``python -m trainer.train``'s (``trainer.train.build_trainer``: GRPO on the tiny random policy, 2
threads) with the agent rollout (agent/'s HiPRAG loop and judges, as ``rollout.factory = "agent"`` builds it) over
the demo's questions and a keyword search of the demo corpus. The judge is a scripted OpenAI-compatible server on
127.0.0.1: HiPRAG's judge replies, deterministic, with usage counts (4 characters a token); every 10th request fails
with HTTP 400 (not retried: an error verdict). The tiny random policy cannot write HiPRAG's tags, so its
generations come from a scripted HiPRAG policy (a reasoning step that searches the question, a concluding step, an
answer); the policy update runs on them as on any rollout.

Prints ``judge/*`` per step as the run's ``metrics.jsonl`` holds them (what the run page draws), and the server's own
count of requests, failures and tokens over the run to check their sums against.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agent.backends import Generation, chatml, cut_at_stop  # noqa: E402
from agent.judge_client import JUDGE_COST_KEYS  # noqa: E402
from bench.scripted_chat_server import ScriptedChatServer, hiprag_reply  # noqa: E402
from retrieval.searcher import RetrievedDocument  # noqa: E402

FAIL_EVERY = 10


def judge_server() -> ScriptedChatServer:
    """HiPRAG's judge replies with usage counts; every ``FAIL_EVERY``-th request a 400 (recorded as a judge error)."""

    def reply(content: str, n: int) -> str | tuple[int, str]:
        if n % FAIL_EVERY == 0:
            return 400, "scripted bad request"
        return hiprag_reply(content, fact_false_every=5, equivalent_true_every=3)

    return ScriptedChatServer(reply)


class KeywordSearch:
    """Top-k passages of the demo corpus by the number of query words they contain."""

    def __init__(self, path: Path) -> None:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        self.docs = [(str(r["id"]), str(r["contents"])) for r in rows]

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        found = []
        for query in queries:
            words = {w.lower().strip("?.,") for w in query.split() if len(w) > 3}
            scored = sorted(self.docs, key=lambda d: -sum(w in d[1].lower() for w in words))[:topk]
            found.append([RetrievedDocument(pid, text, 0.0) for pid, text in scored])
        return found


class ScriptedHipragPolicy:
    """Generations of a policy that writes HiPRAG's format: search the question, conclude, answer."""

    name = "scripted-hiprag"

    def generate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]:
        out = []
        for prompt in prompts:
            text, reason = cut_at_stop(self._reply(prompt), stop)
            out.append(
                Generation(
                    text,
                    "stop" if reason else "eos",
                    reason,
                    prompt_tokens=5,
                    completion_tokens=len(text.split()),
                )
            )
        return out

    @staticmethod
    def _reply(prompt: str) -> str:
        response = prompt.split("<|im_start|>assistant\n")[-1]
        question = prompt.split("User Question:")[-1].split("<|im_end|>")[0].strip()
        if "<context>" not in response:
            return f" I do not know this, so I search.</reasoning>\n    <search>{question}</search> cut"
        if response.endswith("<conclusion>"):
            return "The document names it.</conclusion>\n</step> cut"
        if "I can answer now." not in response:
            return (
                "\n<step>\n    <reasoning>The document answers the question.</reasoning>\n"
                "    <conclusion>I can answer now.</conclusion>\n</step>"
            )
        return "\n</think>\n<answer>unknown</answer>"

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def apply_chat_template(self, messages: Sequence[dict[str, str]]) -> str:
        return chatml(messages)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[:max_tokens])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--output", default="", help="the run's folder (default: a temporary one)")
    args = parser.parse_args(argv)
    import agent.backend_transformers
    from trainer.agent_rollout import AgentRollout
    from trainer.config import config_from_dict
    from trainer.models import tiny_tokenizer
    from trainer.train import build_trainer

    policy = ScriptedHipragPolicy()
    agent.backend_transformers.TransformersBackend = lambda *a, **k: policy  # type: ignore[misc,assignment]
    output = Path(args.output or tempfile.mkdtemp(prefix="searchlab-judge-cost-"))
    server = judge_server()
    judge = {"base_url": server.base_url, "model": "scripted-judge", "max_retries": 0}
    config = config_from_dict(
        {
            "output_dir": str(output),
            "method": "hiprag",
            "model": {"path": "tiny-random", "torch_threads": 2},
            "data": {"path": str(REPO / "demo" / "questions.jsonl")},
            "training": {
                "max_steps": args.steps,
                "learning_rate": 1e-2,
                "per_device_train_batch_size": 4,
                "num_generations": 2,
            },
            "logging": {"sample_every": 0},
            "rollout": {"factory": "agent", "options": {"judge": judge, "index": "(keyword search)"}},
        }
    )
    tokenizer = tiny_tokenizer()
    rollout = AgentRollout(
        "hiprag", tokenizer, KeywordSearch(REPO / "demo" / "corpus.jsonl"), {"judge": judge}
    )
    started = time.perf_counter()
    trainer = build_trainer(config, tokenizer=tokenizer, rollout=rollout)
    trainer.train()
    seconds = time.perf_counter() - started
    server.close()
    rows = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    by_step: dict[int, dict[str, float]] = {}
    for row in rows:
        by_step.setdefault(row["step"], {})[row["key"]] = row["value"]
    print(f"{args.steps} steps in {seconds:.1f} s (2 threads); metrics in {output / 'metrics.jsonl'}")
    print("| step | " + " | ".join(JUDGE_COST_KEYS) + " |")
    print("|---:|" + "---:|" * len(JUDGE_COST_KEYS))
    sums = dict.fromkeys(JUDGE_COST_KEYS, 0.0)
    for step, values in sorted(by_step.items()):
        print(f"| {step} | " + " | ".join(f"{values.get(k, 0):g}" for k in JUDGE_COST_KEYS) + " |")
        for key in JUDGE_COST_KEYS:
            sums[key] += values.get(key, 0.0)
    print(
        f"| sum | {sums['judge/calls']:g} | {sums['judge/errors']:g} | {sums['judge/tokens_in']:g} | "
        f"{sums['judge/tokens_out']:g} | {sums['judge/seconds']:.3f} |"
    )
    print(
        f"server: {server.requests} requests, {server.failed} failed, "
        f"{server.tokens_in} tokens in, {server.tokens_out} tokens out"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
