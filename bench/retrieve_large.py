"""``POST /retrieve`` with 10,000 queries in one request, as Search-R1's client sends a veRL batch, timed against 100.

Search-R1's ``_batch_search`` posts every active rollout's query of a turn in one request
(``requests.post(url, json={"queries": [...], "topk": 3, "return_scores": True}).json()["result"]``); a batch of
820 prompts × 5 rollouts is 4,100 queries. This script builds a small index (HNSW over the model-free
``hashing-256`` encoder, over the first ``--passages`` passages of a FlashRAG corpus; seconds) or takes ``--index``
(e.g. the demo's), serves it with the standalone server (``retrieval.server``, the same ``handle_retrieve`` as the
web app's ``/retrieve``) and times Search-R1's client call for 100 and 10,000 questions, ``--repeats`` times each.

    .venv/bin/python bench/retrieve_large.py
    .venv/bin/python bench/retrieve_large.py --index var/retrieval/indexes/1    # an index folder, e.g. the demo's

Prints the median wall time of each request size, the time per query, the CPU time the process spent (server and
client: the wall time inflates on a loaded machine, the CPU time much less) and the ratio of the two wall times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from retrieval.index import IndexConfig, build_index, load_index  # noqa: E402
from retrieval.server import serve_in_thread  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "wiki_multihop"
SIZES = (100, 10_000)


def questions(path: Path, n: int) -> list[str]:
    """``n`` question texts, cycling through the file (each repeat gets a suffix, so no two are the same)."""
    texts = [json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()]
    return [texts[i % len(texts)] + ("" if i < len(texts) else f" ({i // len(texts)})") for i in range(n)]


def small_index(corpus: Path, passages: int, folder: Path) -> Path:
    head = folder / "corpus.jsonl"
    with corpus.open() as source, head.open("w") as out:
        for _, line in zip(range(passages), source, strict=False):
            out.write(line)
    started = time.perf_counter()
    build_index(head, folder / "index", IndexConfig(kind="hnsw", encoder="hashing-256", build_threads=1))
    print(f"built HNSW/hashing-256 over {passages:,} passages in {time.perf_counter() - started:.1f} s")
    return folder / "index"


def search_r1_client(url: str, queries: list[str], topk: int) -> list[list[dict[str, object]]]:
    """Search-R1's ``_batch_search`` (search_r1/llm_agent/generation.py), as released."""
    payload = {"queries": queries, "topk": topk, "return_scores": True}
    result: list[list[dict[str, object]]] = requests.post(url, json=payload).json()["result"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, help="an index folder (default: build a small one)")
    parser.add_argument("--corpus", type=Path, default=DATA / "corpus.jsonl")
    parser.add_argument("--questions", type=Path, default=DATA / "questions.jsonl")
    parser.add_argument("--passages", type=int, default=5000)
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--faiss-threads", type=int, default=1, help="as the standalone server's default")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.index or small_index(args.corpus, args.passages, Path(tmp))
        index = load_index(folder, faiss_threads=args.faiss_threads)
        server = serve_in_thread(index)
        url = f"{server.url}/retrieve"
        try:
            search_r1_client(url, questions(args.questions, 8), args.topk)  # warm up: first encode, threads
            medians: dict[int, float] = {}
            for size in SIZES:
                batch = questions(args.questions, size)
                times, cpu = [], []
                for _ in range(args.repeats):
                    started, started_cpu = time.perf_counter(), time.process_time()
                    result = search_r1_client(url, batch, args.topk)
                    times.append(time.perf_counter() - started)
                    cpu.append(time.process_time() - started_cpu)
                    if len(result) != size or any(len(hits) != args.topk for hits in result):
                        raise SystemExit(f"{size} queries: got {len(result)} result lists")
                medians[size] = statistics.median(times)
                print(
                    f"{size:>6,} queries in one request: {medians[size]:.3f} s median of {args.repeats} "
                    f"({1000 * medians[size] / size:.3f} ms per query; runs {', '.join(f'{t:.3f}' for t in times)}; "
                    f"CPU {statistics.median(cpu):.3f} s, server and client)"
                )
        finally:
            server.shutdown()
            server.server_close()
    big, small = SIZES[1], SIZES[0]
    print(
        f"index: {folder if args.index else f'HNSW/hashing-256, {args.passages:,} passages'} "
        f"({index.metadata.n_passages:,} passages), topk {args.topk}, standalone server on loopback"
    )
    print(
        f"ratio {big:,} / {small:,} queries: {medians[big] / medians[small]:.1f}x the time for {big // small}x the queries"
    )


if __name__ == "__main__":
    main()
