"""Rollout throughput: the transformers engine against vLLM on the same questions, model, budgets and index.

    python bench/rollout.py --engine both          # in .venv-vllm (`make vllm`); each engine in its own process
    python bench/rollout.py --engine transformers  # any environment
    python bench/rollout.py --engine vllm [--questions 64] [--method hiprag] [--model PATH] [--index PATH]
    python bench/rollout.py --engine prefix        # transformers encoding every row whole, then with the shared
                                                   # prefix encoded once (agent.backend_transformers), back to back

Each engine rolls out the first ``--questions`` wiki_multihop questions with the method's real loop
(:func:`agent.rollout.run_rollouts`: every active trajectory of the batch generates together each turn, the
turn's searches go to the index in one call) under the trainer's default budgets (trainer.config: 3 turns, 64
tokens a turn, 100 observation tokens, top-3, 512 tokens a rollout), sampling at temperature 1 with a fixed seed
as a training step does. It prints, side by side: model tokens generated per second of generation and per second
overall, rollouts per second, and the seconds of each phase (engine start, generate, retrieve, the rest of the
loop). No judge: this measures the rollout engine, not the judge.

The model defaults to the warm-started SmolLM2 when it has its ``warm_start.json``, else the converted SmolLM2
(``$SEARCHLAB_MODEL_CACHE/models``, default ~/.cache/searchlab). vLLM runs with ``dtype=float32`` on a CPU (bf16 is
about 4× slower on AVX2). The two engines sample differently, so their rollouts (and token counts) differ; the
rates are per token and per rollout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python bench/rollout.py` as well as `python -m bench.rollout`
    sys.path.insert(0, str(REPO))
CACHE = Path(os.environ.get("SEARCHLAB_MODEL_CACHE", Path.home() / ".cache" / "searchlab"))
SMOLLM2 = CACHE / "models" / "SmolLM2-135M-Instruct"
SMOLLM2_WARM = CACHE / "models" / "SmolLM2-135M-Instruct-warm"
INDEX = CACHE / "retrieval" / "indexes" / "wiki_multihop-bm25"
SHARED = Path(os.environ.get("SEARCHLAB_SHARED_DIR", REPO.parent / "shared"))
QUESTIONS = SHARED / "data" / "wiki_multihop" / "questions.jsonl"
ENGINES = ("transformers", "vllm", "transformers-whole")
# The pairs one invocation compares, baseline first: transformers against vLLM; and the transformers engine without
# its shared-prefix cache (every row's whole context encoded every turn, as before it had one) against with it.
PAIRS = {"both": ("transformers", "vllm"), "prefix": ("transformers-whole", "transformers")}


def default_model() -> Path:
    return SMOLLM2_WARM if (SMOLLM2_WARM / "warm_start.json").is_file() else SMOLLM2


class Timed:
    """Wraps a callable and adds its wall time to ``seconds`` (generation and search run one at a time)."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.function(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1


class TimedBackend:
    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.name = backend.name
        self.generate = Timed(backend.generate)
        self.apply_chat_template = backend.apply_chat_template
        self.truncate_tokens = backend.truncate_tokens
        self.count_tokens = backend.count_tokens


class TimedSearcher:
    def __init__(self, searcher: Any) -> None:
        self.search = Timed(searcher.search)


def load_questions(n: int) -> list[Any]:
    from agent.rollout import Question

    questions = []
    with QUESTIONS.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            questions.append(Question(str(row["id"]), row["question"], tuple(row["golden_answers"]), "wiki"))
            if len(questions) == n:
                break
    return questions


def make_backend(engine: str, model: str, threads: int, hf_batch: int) -> Any:
    if engine in ("transformers", "transformers-whole"):
        from agent.backend_transformers import TransformersBackend

        backend = TransformersBackend.from_pretrained(model, threads=threads, max_batch_size=hf_batch)
        backend.reuse_prefix = engine == "transformers"
        return backend
    from agent.backend_vllm import VLLMBackend

    return VLLMBackend.for_cpu(model, gpu_memory_utilization=0.15, seed=0)


def run_engine(args: argparse.Namespace) -> dict[str, Any]:
    """One engine: load, roll out, time. Returns the figures as a dict (printed as JSON by a child process)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from agent.rollout import RolloutConfig, run_rollouts
    from agent.rollout_methods import METHODS
    from retrieval.api import searcher_for_index

    started = time.perf_counter()
    backend = make_backend(args.engine, args.model, args.threads, args.hf_batch)
    start_seconds = time.perf_counter() - started
    started = time.perf_counter()
    searcher = TimedSearcher(searcher_for_index(args.index))
    index_seconds = time.perf_counter() - started
    questions = load_questions(args.questions)
    config = RolloutConfig(
        topk=args.topk,
        max_turns=args.max_turns,
        max_new_tokens=args.turn_tokens,
        max_obs_tokens=args.obs_tokens,
        max_rollout_tokens=args.rollout_tokens,
        temperature=args.temperature,
        seed=0,
    )
    timed = TimedBackend(backend)
    started = time.perf_counter()
    rollouts = asyncio.run(run_rollouts(timed, searcher, METHODS[args.method](), questions, config))  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    tokens = sum(r.completion_tokens for r in rollouts)
    generate, retrieve = timed.generate.seconds, searcher.search.seconds
    return {
        "engine": args.engine,
        "model": os.path.basename(os.path.normpath(args.model)),
        "rollouts": len(rollouts),
        "model_tokens": tokens,
        "prompt_tokens": sum(r.prompt_tokens for r in rollouts),
        "searches": sum(r.n_searches for r in rollouts),
        "generate_calls": timed.generate.calls,
        "tokens_per_s_generate": tokens / generate if generate else 0.0,
        "tokens_per_s": tokens / seconds if seconds else 0.0,
        "rollouts_per_s": len(rollouts) / seconds if seconds else 0.0,
        "seconds_engine_start": start_seconds,
        "seconds_index_load": index_seconds,
        "seconds_generate": generate,
        "seconds_retrieve": retrieve,
        "seconds_other": seconds - generate - retrieve,
        "seconds_rollouts": seconds,
        "finished": sum(r.finished for r in rollouts),
    }


ROWS = (
    ("model", "model", "{}"),
    ("rollouts", "rollouts", "{}"),
    ("model tokens", "model_tokens", "{}"),
    ("searches", "searches", "{}"),
    ("generate calls (turns + retries)", "generate_calls", "{}"),
    ("rollouts ended with an answer", "finished", "{}"),
    ("tokens/s (generation)", "tokens_per_s_generate", "{:.1f}"),
    ("tokens/s (end to end)", "tokens_per_s", "{:.1f}"),
    ("rollouts/s", "rollouts_per_s", "{:.3f}"),
    ("s engine start", "seconds_engine_start", "{:.1f}"),
    ("s index load", "seconds_index_load", "{:.1f}"),
    ("s generate", "seconds_generate", "{:.1f}"),
    ("s retrieve", "seconds_retrieve", "{:.2f}"),
    ("s other (loop, tokenising)", "seconds_other", "{:.2f}"),
    ("s rollouts total", "seconds_rollouts", "{:.1f}"),
)


def table(results: list[dict[str, Any]]) -> str:
    width = max(len(label) for label, _, _ in ROWS) + 2
    lines = [f"{'':<{width}}" + "".join(f"{r['engine']:>16}" for r in results)]
    for label, key, fmt in ROWS:
        lines.append(f"{label:<{width}}" + "".join(f"{fmt.format(r[key]):>16}" for r in results))
    if len(results) == 2 and results[0]["tokens_per_s_generate"]:
        ratio = results[1]["tokens_per_s_generate"] / results[0]["tokens_per_s_generate"]
        lines.append(f"{results[1]['engine']} / {results[0]['engine']} generation tokens/s: {ratio:.2f}×")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=(*ENGINES, *PAIRS), default="both")
    parser.add_argument("--model", default=str(default_model()))
    parser.add_argument("--index", default=str(INDEX))
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--method", default="hiprag")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--turn-tokens", type=int, default=64)
    parser.add_argument("--obs-tokens", type=int, default=100)
    parser.add_argument("--rollout-tokens", type=int, default=512)
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the transformers engine")
    parser.add_argument(
        "--hf-batch", type=int, default=16, help="transformers engine rows per generate (its default, 16)"
    )
    parser.add_argument("--json", action="store_true", help="print one engine's figures as JSON (child mode)")
    args = parser.parse_args(argv)

    if args.engine not in PAIRS:
        result = run_engine(args)
        print(json.dumps(result) if args.json else table([result]))
        return 0
    print(
        f"{args.questions} questions of {QUESTIONS.name}, {args.method}, model {args.model}, index {args.index}, "
        f"budgets: {args.max_turns} turns × {args.turn_tokens} tokens, {args.obs_tokens} observation tokens, "
        f"top-{args.topk}, {args.rollout_tokens} tokens a rollout, temperature {args.temperature}",
        flush=True,
    )
    results = []
    forwarded = [
        a
        for a in (argv if argv is not None else sys.argv[1:])
        if a not in ("--engine", *PAIRS, *(f"--engine={pair}" for pair in PAIRS))
    ]
    for engine in PAIRS[args.engine]:
        command = [sys.executable, str(Path(__file__).resolve()), *forwarded, "--engine", engine, "--json"]
        if "--model" not in forwarded:
            command += ["--model", args.model]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return done.returncode
        # The child's figures are its last JSON line; libraries may print after it (seen: the transformers arm).
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            print(f"{engine}: no result line in its output:\n{done.stdout[-2000:]}", file=sys.stderr)
            return 1
        results.append(json.loads(lines[-1]))
        # Each engine's figures as soon as it is done: a later engine that fails loses nothing of this one's.
        print(f"{engine}: {lines[-1]}", flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
