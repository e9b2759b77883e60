"""The stop criteria built once (issue 35): per-call time of ``TransformersBackend.generate`` before and after.

Before: ``generate(stop_strings=..., tokenizer=...)``, where transformers builds a ``StopStringCriteria`` every call
(its cache key, the tokenizer's ``get_vocab()``, changes order from call to call, so its cache never hits). After:
the criterion built once per tokenizer and stop strings (``agent.backend_transformers.stop_criteria``), passed as
``stopping_criteria=``. Times, with SmolLM2-135M-Instruct (the model cache or ``var/models``; never downloaded):

1. building the criterion alone, for HiPRAG's stop strings (what every call paid before, and the first call after);
2. one ``generate`` call of a batch of HiPRAG prompts, ``--new-tokens`` tokens, alternating before/after
   (``--calls`` each, greedy, so both generate the same tokens: checked).

    .venv/bin/python bench/experiment3_stop_criteria.py [--calls 5] [--new-tokens 16] [--batch 4] [--threads 1] [--model DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

QUESTIONS = (
    "who got the first nobel prize in physics",
    "when is the next deadpool movie being released",
    "who sings does he love me with reba",
    "where is the world's largest thermometer located",
    "how many episodes are in chicago fire season 4",
    "who played the father in the sound of music",
    "what is the name of the girl in the wizard of oz",
    "when was the first airplane used in war",
)


def find_model(given: Path | None) -> Path:
    cache = Path(os.environ.get("SEARCHLAB_MODEL_CACHE", Path.home() / ".cache" / "searchlab"))
    for folder in (
        given,
        cache / "models" / "SmolLM2-135M-Instruct",
        REPO / "var/models/SmolLM2-135M-Instruct",
    ):
        if folder is not None and (folder / "config.json").is_file():
            return folder
    raise SystemExit("SmolLM2-135M-Instruct not found: run `make demo` once or pass --model DIR")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)"
    )
    args = parser.parse_args(argv)

    from transformers import StopStringCriteria

    from agent.backend_transformers import TransformersBackend
    from scoring.judging.hiprag import initial_prompt

    model = find_model(args.model)
    backend = TransformersBackend.from_pretrained(str(model), device="cpu", threads=args.threads)
    # HiPRAG's prompt as its rollout sends it (the forced prefix included) and its stop strings between steps
    prompts = [initial_prompt(QUESTIONS[i % len(QUESTIONS)]) for i in range(args.batch)]
    stop = ("</search>", "</conclusion>", "</answer>")
    print(
        f"model {model.name}; stop strings {stop}; batch {args.batch}; {args.new_tokens} new tokens; greedy"
    )

    builds = []
    for _ in range(args.calls):
        started = time.perf_counter()
        StopStringCriteria(tokenizer=backend.tokenizer, stop_strings=list(stop))
        builds.append(time.perf_counter() - started)
    print(f"StopStringCriteria built: median {statistics.median(builds):.3f} s over {args.calls} builds")

    times: dict[bool, list[float]] = {False: [], True: []}
    outputs: dict[bool, list[tuple[int, ...] | None]] = {}
    backend.generate(prompts, stop=stop, max_new_tokens=2)  # warm-up (and the prefix cache of the prompt)
    for _ in range(args.calls):
        for reuse in (False, True):
            backend.reuse_stop_criteria = reuse
            started = time.perf_counter()
            generations = backend.generate(prompts, stop=stop, max_new_tokens=args.new_tokens)
            times[reuse].append(time.perf_counter() - started)
            outputs[reuse] = [g.token_ids for g in generations]
    if outputs[False] != outputs[True]:
        print("DIFFERENT tokens before and after", file=sys.stderr)
        return 1
    before, after = statistics.median(times[False]), statistics.median(times[True])
    print(f"generate, built every call (before): median {before:.3f} s a call over {args.calls}")
    print(f"generate, built once (after):        median {after:.3f} s a call over {args.calls}")
    print(f"ratio before/after: {before / after:.2f}x; saved {before - after:.3f} s a call; same tokens: yes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
