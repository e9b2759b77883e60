"""Chat trajectories (OpenAI-style messages with tool calls): parse and score throughput, and the same answers as the
tag format they mirror.

Generates deterministic conversations (seeded): 0–4 search calls (some parallel, some veRL-style ``query_list``
arguments, some tool messages without ids), an optional non-search tool, a final answer with or without
``<answer>``. Prints:

1. parse rate of :func:`scoring.formats.chat.parse_chat_messages` (trajectories/s) and of Search-R1's tag parser on
   the equivalent tag text, for scale;
2. parse + score rate of HiPRAG (with one step verdict per step) and Search-R1's format reward on the chats;
3. agreement with the tag format: each chat with plain search calls and its Search-R1 tag twin (same reasoning,
   queries, results and answer) get the same Search-R1 v0.3 reward and the same steps' kinds, queries and contexts.

    .venv/bin/python bench/chat_trajectories.py [--n 5000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scoring.chat_scoring import score_chat
from scoring.formats.chat import parse_chat_messages
from scoring.formats.searchr1 import parse_searchr1
from scoring.scorer import score

WORDS = "capital film director river mountain award novel painter city country born founded king war".split()


def _phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def conversation(rng: random.Random, *, plain: bool = False) -> tuple[list[dict[str, Any]], str, list[str]]:
    """A chat, its Search-R1 tag twin (meaningful when ``plain``: one search per turn, ids, no other tool) and golds."""
    gold = _phrase(rng, 2)
    messages: list[dict[str, Any]] = [{"role": "user", "content": _phrase(rng, 8) + "?"}]
    tags: list[str] = []
    for turn in range(rng.randint(0, 4)):
        thought, query, result = _phrase(rng, 6), _phrase(rng, 3), f"Doc 1(Title: x) {_phrase(rng, 30)}"
        parallel = not plain and rng.random() < 0.2
        calls = [
            {
                "id": f"c{turn}_{k}",
                "type": "function",
                "function": {
                    "name": "search",
                    "arguments": {"query_list": [query, query + " 2"]}
                    if not plain and rng.random() < 0.3
                    else json.dumps({"query": query}),
                },
            }
            for k in range(2 if parallel else 1)
        ]
        if not plain and rng.random() < 0.1:
            calls.append(
                {"id": f"t{turn}", "type": "function", "function": {"name": "calc", "arguments": "{}"}}
            )
        messages.append({"role": "assistant", "content": thought, "tool_calls": calls})
        keep_ids = plain or rng.random() < 0.5
        for call in calls:
            tool: dict[str, Any] = {"role": "tool", "content": result}
            if keep_ids:
                tool["tool_call_id"] = call["id"]
            messages.append(tool)
        tags.append(f"<think>{thought}</think><search>{query}</search><information>{result}</information>")
    answer = gold if rng.random() < 0.5 else _phrase(rng, 2)
    closing = _phrase(rng, 5)
    tagged = plain or rng.random() < 0.7
    messages.append(
        {"role": "assistant", "content": f"{closing} <answer>{answer}</answer>" if tagged else answer}
    )
    tags.append(f"<think>{closing}</think><answer>{answer}</answer>")
    return messages, "".join(tags), [gold]


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f}/s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    chats = [conversation(rng) for _ in range(args.n)]

    started = time.perf_counter()
    parsed = [parse_chat_messages(messages) for messages, _, _ in chats]
    parse_s = time.perf_counter() - started
    twins = [conversation(random.Random(args.seed * 1_000_003 + i), plain=True) for i in range(args.n)]
    started = time.perf_counter()
    for _, text, _ in twins:
        parse_searchr1(text)
    tag_s = time.perf_counter() - started
    print(
        f"{args.n} chats, {sum(len(t.steps) for t in parsed)} steps, {sum(t.n_searches for t in parsed)} searches"
    )
    print(f"parse: chat {_rate(args.n, parse_s)}; Search-R1 tags {_rate(args.n, tag_s)}")

    started = time.perf_counter()
    for (messages, _, golds), _ in zip(chats, parsed, strict=True):
        trajectory = parse_chat_messages(messages)
        score_chat("hiprag", trajectory, golds, judgements={"step_flags": [False] * len(trajectory.steps)})
    hiprag_s = time.perf_counter() - started
    started = time.perf_counter()
    for messages, _, golds in chats:
        score_chat("search_r1", parse_chat_messages(messages), golds)
    searchr1_s = time.perf_counter() - started
    print(
        f"parse + score: HiPRAG {_rate(args.n, hiprag_s)}; Search-R1 format reward {_rate(args.n, searchr1_s)}"
    )

    same = 0
    for messages, text, golds in twins:
        chat = score_chat("search_r1", parse_chat_messages(messages), golds, params={"retrieval_score": 0.1})
        tag = score("search_r1", text, golds, params={"retrieval_score": 0.1})
        steps = [(s.kind, s.query, s.context) for s in chat.trajectory.steps]
        same += chat.reward == tag.reward and steps == [
            (s.kind, s.query, s.context) for s in tag.trajectory.steps
        ]
    print(
        f"chat vs tag twin (Search-R1 v0.3 reward, steps' kinds, queries, contexts): {same} of {args.n} equal"
    )
    return 0 if same == args.n else 1


if __name__ == "__main__":
    sys.exit(main())
