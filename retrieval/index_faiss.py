"""FAISS indexes over L2-normalised embeddings with inner product (cosine): exact flat, IVF (optionally SQ8) and
HNSW, with the approximate ones' search breadth (``nprobe`` / ``efSearch``) tuned against exact search at build time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from retrieval.encoders import Embeddings

DEFAULT_FAISS_THREADS = (
    1  # one thread: on a 2-core box two are slower, and server threads already run in parallel
)
NPROBE_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024)
EF_SEARCH_STEPS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024)


def faiss_module() -> Any:
    import faiss

    return faiss


def set_threads(threads: int) -> None:
    faiss_module().omp_set_num_threads(threads)


def default_nlist(n: int) -> int:
    """About 4·sqrt(N) inverted lists, and at least 39 training points per list (FAISS warns below that)."""
    return max(1, min(round(4 * math.sqrt(n)), n // 39 or 1))


def build_dense(
    kind: str,
    vectors: Embeddings,
    *,
    nlist: int | None,
    sq8: bool,
    hnsw_m: int,
    ef_construction: int,
    train_size: int,
    seed: int,
) -> tuple[Any, dict[str, Any]]:
    """A filled CPU index of ``kind`` and the parameters it was built with."""
    faiss = faiss_module()
    n, dimension = vectors.shape
    if kind == "flat":
        index = faiss.IndexFlatIP(dimension)
        index.add(vectors)
        return index, {}
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dimension, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        index.add(vectors)
        return index, {"hnsw_m": hnsw_m, "ef_construction": ef_construction}
    if kind == "ivf":
        lists = nlist or default_nlist(n)
        quantizer = faiss.IndexFlatIP(dimension)
        if sq8:
            index = faiss.IndexIVFScalarQuantizer(
                quantizer, dimension, lists, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
        else:
            index = faiss.IndexIVFFlat(quantizer, dimension, lists, faiss.METRIC_INNER_PRODUCT)
        sample = vectors
        if n > train_size:
            rows = np.sort(np.random.default_rng(seed).choice(n, size=train_size, replace=False))
            sample = vectors[rows]
        index.train(sample)
        index.add(vectors)
        return index, {"nlist": lists, "sq8": sq8, "train_size": int(sample.shape[0])}
    raise ValueError(f"unknown FAISS index kind {kind!r}")


def set_breadth(index: Any, kind: str, breadth: int) -> None:
    """Lists probed (IVF) or the candidate queue length (HNSW) per query."""
    faiss = faiss_module()
    if kind == "ivf":
        faiss.extract_index_ivf(index).nprobe = breadth
    elif kind == "hnsw":
        faiss.downcast_index(index).hnsw.efSearch = breadth


@dataclass(frozen=True, slots=True)
class Tuning:
    breadth: int
    recall: float
    tried: tuple[tuple[int, float], ...]


def overlap_recall(found: npt.NDArray[np.int64], exact: npt.NDArray[np.int64]) -> float:
    """Mean fraction of each query's exact top-k rows that the approximate top-k also holds."""
    hits = [len(set(f.tolist()) & set(e.tolist())) / len(e) for f, e in zip(found, exact, strict=True)]
    return float(np.mean(hits)) if hits else 1.0


def tune_breadth(
    index: Any, kind: str, vectors: Embeddings, queries: Embeddings, *, topk: int, target: float
) -> Tuning | None:
    """The smallest ``nprobe`` / ``efSearch`` whose top-``topk`` keeps ``target`` of exact search's top-``topk``
    on ``queries`` (the largest tried when none does); ``None`` for kinds without a breadth."""
    if kind not in ("ivf", "hnsw") or len(queries) == 0:
        return None
    k = min(topk, vectors.shape[0])
    exact = np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :k]
    if kind == "ivf":
        limit = faiss_module().extract_index_ivf(index).nlist
        steps: Sequence[int] = [s for s in NPROBE_STEPS if s < limit] + [limit]
    else:
        steps = EF_SEARCH_STEPS
    tried: list[tuple[int, float]] = []
    for breadth in steps:
        set_breadth(index, kind, breadth)
        _, found = index.search(queries, k)
        tried.append((breadth, overlap_recall(found, exact)))
        if tried[-1][1] >= target:
            break
    breadth, recall = tried[-1]
    set_breadth(index, kind, breadth)
    return Tuning(breadth, recall, tuple(tried))


def to_gpus(index: Any, kind: str) -> Any:
    """Every visible GPU when faiss-gpu is installed and sees one; HNSW has no GPU version and stays on CPU."""
    faiss = faiss_module()
    if kind == "hnsw" or not hasattr(faiss, "index_cpu_to_all_gpus") or faiss.get_num_gpus() == 0:
        return index
    options = faiss.GpuMultipleClonerOptions()
    options.shard = True  # split the vectors over the GPUs rather than copying all of them to each
    return faiss.index_cpu_to_all_gpus(index, co=options)


def read(path: str) -> Any:
    return faiss_module().read_index(path)


def write(index: Any, path: str) -> None:
    faiss_module().write_index(index, path)
