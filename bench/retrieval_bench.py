"""Retrieval benchmark: every index kind next to exact flat search, in one run, over any FlashRAG files.

For each kind: build time, size on disk, recall@1/3/10 of the supporting passages (the fraction of a question's
``metadata.supporting_titles`` whose title is among the top k passages for the question text; per dataset and
overall), query latency p50/p99 (search alone, and encode + search; single queries and batches), and ``/retrieve``
throughput with 16 concurrent clients over loopback HTTP.

    .venv/bin/python bench/retrieval_bench.py \\
        --corpus ../shared/data/wiki_multihop/corpus.jsonl --questions ../shared/data/wiki_multihop/questions.jsonl

Passage embeddings are cached under var/retrieval/embeddings (keyed by encoder settings and corpus sha256), so
only the first run pays for encoding; the encode time of that run is kept next to the cache and printed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from retrieval.corpus import CorpusFile  # noqa: E402
from retrieval.encoders import DEFAULT_ENCODER, Encoder, encoder_load, passage_embeddings  # noqa: E402
from retrieval.hybrid import reciprocal_rank_fusion  # noqa: E402
from retrieval.index import INDEX_KINDS, IndexConfig, IndexSearcher, build_index, index_size_bytes, load_index  # noqa: E402
from retrieval.server import serve_in_thread  # noqa: E402
from scoring.observations import RetrievedDocument  # noqa: E402

KS = (1, 3, 10)
DEFAULT_SHARED = Path(os.environ.get("SEARCHLAB_SHARED_DIR", ROOT.parent / "shared"))
DEFAULT_DATA = DEFAULT_SHARED / "data" / "wiki_multihop"
Rows = npt.NDArray[np.int64]


@dataclass
class Question:
    text: str
    source: str
    supporting: frozenset[str]


@dataclass
class Result:
    kind: str
    build_s: float = float("nan")
    size_mb: float = float("nan")
    breadth: str = ""
    recall: dict[str, dict[int, float]] = field(default_factory=dict)  # dataset ("all" too) -> k -> recall
    search_ms: tuple[float, float] = (float("nan"), float("nan"))
    e2e_ms: tuple[float, float] = (float("nan"), float("nan"))
    batch_ms: tuple[float, float] = (float("nan"), float("nan"))
    http_qps: float = float("nan")
    http_ms: tuple[float, float] = (float("nan"), float("nan"))


def read_questions(path: Path, limit: int | None) -> list[Question]:
    questions = []
    with path.open() as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            meta = row.get("metadata", {})
            titles = meta.get("supporting_titles") or []
            if titles:
                questions.append(Question(row["question"], meta.get("data_source", "?"), frozenset(titles)))
    if limit is not None and limit < len(questions):  # an even stride keeps every dataset's share
        questions = [questions[i * len(questions) // limit] for i in range(limit)]
    return questions


def recall_table(
    rows: Rows, titles: Sequence[str], questions: Sequence[Question]
) -> dict[str, dict[int, float]]:
    per: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for question, found in zip(questions, rows, strict=True):
        ranked = [titles[r] if r >= 0 else None for r in found.tolist()]
        for k in KS:
            share = len(question.supporting & set(ranked[:k])) / len(question.supporting)
            per[question.source][k].append(share)
            per["all"][k].append(share)
    return {source: {k: float(np.mean(v)) for k, v in by_k.items()} for source, by_k in per.items()}


def percentiles(samples_s: Sequence[float]) -> tuple[float, float]:
    ms = np.asarray(samples_s) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def timed(call: Callable[[int], object], repeats: int) -> tuple[float, float]:
    """p50/p99 of ``call(i)`` for i in range(repeats), after one warm-up call."""
    call(0)
    samples = []
    for i in range(repeats):
        started = time.perf_counter()
        call(i)
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def bench_latency(
    result: Result,
    searcher: IndexSearcher,
    questions: Sequence[Question],
    vectors: npt.NDArray[np.float32] | None,
) -> None:
    texts = [q.text for q in questions]
    n, m = min(1000, len(texts)), min(300, len(texts))
    if vectors is not None:
        result.search_ms = timed(lambda i: searcher.search_vectors(vectors[i : i + 1], 3), n)
    else:
        result.search_ms = timed(lambda i: searcher.search_rows([texts[i]], 3), n)
    result.e2e_ms = timed(lambda i: searcher.search([texts[i]], 3), m)
    batches = [texts[i : i + 64] for i in range(0, min(len(texts), 64 * 20), 64)]
    result.batch_ms = timed(lambda i: searcher.search(batches[i], 3), len(batches))


def bench_http(
    result: Result, searcher: object, questions: Sequence[Question], clients: int, per_client: int
) -> None:
    server = serve_in_thread(searcher, port=0)  # type: ignore[arg-type]
    host, port = "127.0.0.1", int(server.server_address[1])
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client(c: int) -> None:
        connection = http.client.HTTPConnection(host, port, timeout=60)
        mine = []
        barrier.wait()
        for i in range(per_client):
            question = questions[(c * per_client + i) % len(questions)].text
            body = json.dumps({"queries": [question], "topk": 3, "return_scores": True})
            started = time.perf_counter()
            connection.request("POST", "/retrieve", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read()
            mine.append(time.perf_counter() - started)
            if response.status != 200 or len(json.loads(data)["result"][0]) != 3:
                errors.append(f"{response.status}: {data[:200]!r}")
        connection.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    server.shutdown()
    server.server_close()
    if errors:
        raise RuntimeError(f"{len(errors)} /retrieve errors, first: {errors[0]}")
    result.http_qps = len(latencies) / elapsed
    result.http_ms = percentiles(latencies)


class FusedRows:
    """Hybrid by RRF of two loaded indexes, as a Searcher plus row-level search for the recall table."""

    def __init__(self, dense: IndexSearcher, sparse: IndexSearcher, depth: int = 20) -> None:
        self.dense, self.sparse, self.depth = dense, sparse, depth

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        depth = max(topk, self.depth)
        a, b = self.dense.search(queries, depth), self.sparse.search(queries, depth)
        return [reciprocal_rank_fusion([x, y], topk=topk) for x, y in zip(a, b, strict=True)]


def fuse_rows(a: Rows, b: Rows, topk: int) -> Rows:
    out = np.full((a.shape[0], topk), -1, dtype=np.int64)
    for q in range(a.shape[0]):
        fused = reciprocal_rank_fusion(
            [
                [RetrievedDocument(str(r), "", 0.0) for r in a[q].tolist() if r >= 0],
                [RetrievedDocument(str(r), "", 0.0) for r in b[q].tolist() if r >= 0],
            ],
            topk=topk,
        )
        out[q, : len(fused)] = [int(d.id) for d in fused]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_DATA / "corpus.jsonl")
    parser.add_argument("--questions", type=Path, default=DEFAULT_DATA / "questions.jsonl")
    parser.add_argument("--encoder", default=DEFAULT_ENCODER)
    parser.add_argument("--kinds", default="flat,ivf,hnsw,bm25,hybrid")
    parser.add_argument("--work", type=Path, default=ROOT / "var" / "retrieval")
    parser.add_argument("--limit-questions", type=int)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests-per-client", type=int, default=40)
    parser.add_argument(
        "--keep", action="store_true", help="keep the built indexes under --work/bench-indexes"
    )
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    unknown = set(kinds) - {*INDEX_KINDS, "hybrid"}
    if unknown:
        parser.error(
            f"unknown --kinds {', '.join(sorted(unknown))}; choose from {', '.join(INDEX_KINDS)}, hybrid"
        )

    load_at_start = os.getloadavg()[0]
    cache = args.work / "embeddings"
    corpus = CorpusFile.scan(args.corpus)
    titles = [p.title for p in corpus.passages(range(len(corpus)))]
    questions = read_questions(args.questions, args.limit_questions)
    sources = sorted({q.source for q in questions})
    print(f"corpus {args.corpus}: {len(corpus)} passages, sha256 {corpus.sha256[:16]}…")
    print(f"questions {args.questions}: {len(questions)} with supporting titles ({', '.join(sources)})")

    encoder: Encoder = encoder_load(args.encoder)
    stamp = cache / f"encode-seconds-{corpus.sha256[:16]}-{encoder.name.replace('/', '-')}.txt"
    _, seconds = passage_embeddings(encoder, corpus, cache_dir=cache)
    if seconds:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(f"{seconds:.1f}\n")
        print(f"encoded the passages with {encoder.name} in {seconds:.0f} s (cached for later runs)")
    else:
        recorded = stamp.read_text().strip() if stamp.exists() else "?"
        print(f"passage embeddings from cache ({encoder.name}; the run that encoded them took {recorded} s)")
    started = time.perf_counter()
    question_vectors = encoder.encode_queries([q.text for q in questions])
    print(f"encoded {len(questions)} questions in {time.perf_counter() - started:.1f} s")

    results: dict[str, Result] = {}
    searchers: dict[str, IndexSearcher] = {}
    rows10: dict[str, Rows] = {}
    for kind in [k for k in INDEX_KINDS if k in kinds]:  # flat first: the others are read next to it
        folder = args.work / "bench-indexes" / kind
        config = IndexConfig(kind=kind, encoder=encoder.name)
        metadata = build_index(args.corpus, folder, config, encoder=encoder, embeddings_cache=cache)
        searcher = load_index(folder, encoder=None if kind == "bm25" else encoder)
        result = Result(kind, metadata.build_seconds, index_size_bytes(folder) / 1e6)
        for name in ("nprobe", "ef_search", "nlist"):
            if name in metadata.params:
                result.breadth += f"{name}={metadata.params[name]} "
        vectors = None if kind == "bm25" else question_vectors
        if vectors is not None:
            _, rows = searcher.search_vectors(vectors, 10)
        else:
            _, rows = searcher.search_rows([q.text for q in questions], 10)
        rows10[kind] = rows
        result.recall = recall_table(rows, titles, questions)
        bench_latency(result, searcher, questions, vectors)
        bench_http(result, searcher, questions, args.clients, args.requests_per_client)
        results[kind] = result
        searchers[kind] = searcher
        print(f"  {kind}: done", flush=True)
    if "hybrid" in kinds and "hnsw" in searchers and "bm25" in searchers:
        hybrid = FusedRows(searchers["hnsw"], searchers["bm25"])
        _, dense20 = searchers["hnsw"].search_vectors(question_vectors, 20)
        _, sparse20 = searchers["bm25"].search_rows([q.text for q in questions], 20)
        result = Result("hybrid", breadth="rrf(hnsw,bm25)")
        result.recall = recall_table(fuse_rows(dense20, sparse20, 10), titles, questions)
        texts = [q.text for q in questions]
        result.e2e_ms = timed(lambda i: hybrid.search([texts[i]], 3), min(300, len(texts)))
        bench_http(result, hybrid, questions, args.clients, args.requests_per_client)
        results["hybrid"] = result
    if not args.keep:
        shutil.rmtree(args.work / "bench-indexes", ignore_errors=True)
    print_tables(results, sources, encoder.name)
    # Latencies on a shared machine are only as good as its idle time: say how busy it was.
    print(
        f"\nload average (1 min) at start {load_at_start:.1f}, at end {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs"
    )


def print_tables(results: dict[str, Result], sources: Sequence[str], encoder: str) -> None:
    flat = results.get("flat")
    print(f"\nencoder {encoder}; FAISS 1 thread; latency in ms; recall of supporting titles in the top k")
    header = (f"{'index':<8} {'build s':>8} {'MB':>7} {'R@1':>6} {'R@3':>6} {'R@10':>6} {'R@3/flat':>8} "
              f"{'search p50/p99':>15} {'enc+search p50/p99':>19} {'batch64 p50/p99':>16} "
              f"{'/retrieve q/s':>13} {'p50/p99':>13}  params")  # fmt: skip
    print(header)
    print("-" * len(header))
    for r in results.values():
        recall = r.recall["all"]
        ratio = recall[3] / flat.recall["all"][3] if flat else float("nan")
        print(
            f"{r.kind:<8} {r.build_s:>8.1f} {r.size_mb:>7.1f} {recall[1]:>6.3f} {recall[3]:>6.3f} {recall[10]:>6.3f} "
            f"{ratio:>8.3f} {r.search_ms[0]:>7.2f}/{r.search_ms[1]:<7.2f} {r.e2e_ms[0]:>9.2f}/{r.e2e_ms[1]:<9.2f} "
            f"{r.batch_ms[0]:>7.1f}/{r.batch_ms[1]:<8.1f} {r.http_qps:>13.0f} {r.http_ms[0]:>6.1f}/{r.http_ms[1]:<6.1f}  "
            f"{r.breadth}"
        )
    print("\nrecall@1/3/10 per dataset")
    print(f"{'index':<8} " + " ".join(f"{s:>24}" for s in sources))
    for r in results.values():
        cells = ["/".join(f"{r.recall[s][k]:.3f}" for k in KS) if s in r.recall else "-" for s in sources]
        print(f"{r.kind:<8} " + " ".join(f"{c:>24}" for c in cells))


if __name__ == "__main__":
    main()
