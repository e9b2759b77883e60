"""Build, save and load a search index over a FlashRAG corpus; search it as a :class:`~retrieval.searcher.Searcher`.

An index is a folder::

    metadata.json   kind, encoder, dimension, corpus path + sha256, n passages, build parameters, timings, version
    offsets.npy     byte offset of every corpus row (the passages themselves stay in the corpus file)
    index.faiss     FAISS kinds (flat, ivf, hnsw)
    bm25/           the bm25s files (kind bm25)

Loading checks the folder against what it is used with: a different encoder, or a corpus whose bytes changed
since the build, is an :class:`IndexMismatchError` naming both values.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from retrieval import index_bm25, index_faiss
from retrieval.corpus import CorpusFile, corpus_checksum
from retrieval.encoders import DEFAULT_ENCODER, Encoder, encoder_load, passage_embeddings
from scoring.observations import RetrievedDocument

IndexKind = Literal["flat", "ivf", "hnsw", "bm25"]
INDEX_KINDS: tuple[IndexKind, ...] = ("flat", "ivf", "hnsw", "bm25")
DENSE_KINDS = ("flat", "ivf", "hnsw")
BM25_ENCODER = "bm25"
FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"
OFFSETS_FILE = "offsets.npy"
FAISS_FILE = "index.faiss"
BM25_FOLDER = "bm25"

BuildProgress = Callable[[str, int, int], None]
"""``(stage, done, total)`` with stage one of scan, encode, index, tune, save; ``total`` 0 when unknown."""


# Where each build stage ends, as a fraction of the whole build (encoding dominates a dense build on CPU).
_STAGE_SPANS = {"scan": (0.0, 0.05), "encode": (0.05, 0.85), "index": (0.85, 0.95), "tune": (0.95, 0.98),
                "save": (0.98, 1.0)}  # fmt: skip


def build_fraction(stage: str, done: int, total: int) -> float:
    """One 0..1 figure for a progress bar from a :data:`BuildProgress` report.

    >>> build_fraction("encode", 50, 100)
    0.45
    """
    start, end = _STAGE_SPANS.get(stage, (0.0, 1.0))
    share = min(done / total, 1.0) if total > 0 else 0.0
    return round(start + (end - start) * share, 4)


class RetrievalIndexError(RuntimeError):
    """Base of the errors an index folder can raise."""


class IndexMismatchError(RetrievalIndexError):
    """The index was built with another encoder or over other corpus bytes than it is being loaded with."""


class IndexNotFoundError(RetrievalIndexError):
    pass


@dataclass(frozen=True, slots=True)
class IndexConfig:
    """How to build an index. The defaults are the embedded setup: HNSW over MiniLM, one FAISS thread."""

    kind: IndexKind = "hnsw"
    encoder: str = DEFAULT_ENCODER
    # IVF: lists (None: ~4·sqrt(N)); 8-bit scalar quantisation of the stored vectors (4x smaller, ~same recall).
    ivf_nlist: int | None = None
    ivf_sq8: bool = True
    ivf_train_size: int = 100_000
    # HNSW: neighbours per node and the construction queue.
    hnsw_m: int = 32
    hnsw_ef_construction: int = 128
    # nprobe / efSearch: the smallest that keeps this share of exact top-k on pseudo-queries (sampled titles).
    tune_target: float = 0.99
    tune_topk: int = 3
    tune_queries: int = 300
    # BM25 (Lucene defaults).
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    build_threads: int = max(1, os.cpu_count() or 1)
    seed: int = 0


@dataclass(frozen=True, slots=True)
class IndexMetadata:
    kind: IndexKind
    encoder: str
    dimension: int
    corpus_path: str
    corpus_sha256: str
    n_passages: int
    params: dict[str, Any]
    build_seconds: float
    encode_seconds: float
    searchlab_version: str
    created_at: str
    format: int = FORMAT_VERSION
    tuning: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, folder: Path) -> IndexMetadata:
        path = folder / METADATA_FILE
        if not path.exists():
            raise IndexNotFoundError(f"no index at {folder}: {METADATA_FILE} is missing")
        raw = json.loads(path.read_text())
        if raw.get("format") != FORMAT_VERSION:
            raise IndexMismatchError(
                f"index {folder} has format {raw.get('format')!r}; this searchlab reads format {FORMAT_VERSION}"
            )
        return cls(**raw)

    def write(self, folder: Path) -> None:
        (folder / METADATA_FILE).write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")


def searchlab_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("searchlab")
    except PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError):
            return "unknown"


def _stage(progress: BuildProgress | None, stage: str) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(stage, done, total)


def _pseudo_queries(corpus: CorpusFile, config: IndexConfig) -> list[str]:
    """Titles of sampled passages: short, query-like, and every one has a well-defined exact neighbourhood."""
    n = min(config.tune_queries, len(corpus))
    rows = np.random.default_rng(config.seed).choice(len(corpus), size=n, replace=False)
    return [corpus[int(row)].title or corpus[int(row)].text[:80] for row in rows]


def build_index(
    corpus_path: Path | str,
    out_dir: Path | str,
    config: IndexConfig = IndexConfig(),
    *,
    encoder: Encoder | None = None,
    progress: BuildProgress | None = None,
    embeddings_cache: Path | None = None,
) -> IndexMetadata:
    """Index the corpus into ``out_dir`` (replaced if it exists, written to a sibling first so a failed build
    never leaves half an index), and return its metadata. ``encoder`` overrides loading ``config.encoder``."""
    if config.kind not in INDEX_KINDS:
        raise ValueError(f"kind must be one of {', '.join(INDEX_KINDS)}; got {config.kind!r}")
    out = Path(out_dir)
    started = time.perf_counter()
    corpus = CorpusFile.scan(corpus_path, _stage(progress, "scan"))
    if len(corpus) == 0:
        raise ValueError(f"corpus {corpus_path} has no passages")
    building = out.with_name(out.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    encode_seconds = 0.0
    tuning: dict[str, Any] = {}
    if config.kind in DENSE_KINDS:
        index_faiss.set_threads(config.build_threads)
    try:
        if config.kind == "bm25":
            if progress is not None:
                progress("index", 0, len(corpus))
            retriever, params = index_bm25.build(corpus.iter_contents(), k1=config.bm25_k1, b=config.bm25_b)
            index_bm25.save(retriever, building / BM25_FOLDER)
            encoder_name, dimension = BM25_ENCODER, 0
        else:
            encoder = encoder or encoder_load(config.encoder)
            vectors, encode_seconds = passage_embeddings(
                encoder, corpus, cache_dir=embeddings_cache, progress=_stage(progress, "encode")
            )
            if progress is not None:
                progress("index", 0, len(corpus))
            index, params = index_faiss.build_dense(
                config.kind,
                vectors,
                nlist=config.ivf_nlist,
                sq8=config.ivf_sq8,
                hnsw_m=config.hnsw_m,
                ef_construction=config.hnsw_ef_construction,
                train_size=config.ivf_train_size,
                seed=config.seed,
            )
            if progress is not None:
                progress("tune", 0, 1)
            tuned = None
            if config.kind in ("ivf", "hnsw"):
                queries = encoder.encode_queries(_pseudo_queries(corpus, config))
                tuned = index_faiss.tune_breadth(
                    index, config.kind, vectors, queries, topk=config.tune_topk, target=config.tune_target
                )
            if tuned is not None:
                params["nprobe" if config.kind == "ivf" else "ef_search"] = tuned.breadth
                tuning = {"target": config.tune_target, "topk": config.tune_topk, "recall": tuned.recall,
                          "tried": [list(t) for t in tuned.tried]}  # fmt: skip
            params["encoder_settings"] = str(getattr(encoder, "cache_key", encoder.name))
            index_faiss.write(index, str(building / FAISS_FILE))
            encoder_name, dimension = encoder.name, encoder.dimension
        if progress is not None:
            progress("save", 0, 1)
        np.save(building / OFFSETS_FILE, corpus.offsets)
        metadata = IndexMetadata(
            kind=config.kind,
            encoder=encoder_name,
            dimension=dimension,
            corpus_path=str(Path(corpus_path).resolve()),
            corpus_sha256=corpus.sha256,
            n_passages=len(corpus),
            params=params,
            build_seconds=round(time.perf_counter() - started, 3),
            encode_seconds=round(encode_seconds, 3),
            searchlab_version=searchlab_version(),
            created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            tuning=tuning,
        )
        metadata.write(building)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(building, out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    finally:
        corpus.close()
        if config.kind in DENSE_KINDS:
            index_faiss.set_threads(index_faiss.DEFAULT_FAISS_THREADS)
    if progress is not None:
        progress("save", 1, 1)
    return metadata


def index_size_bytes(folder: Path | str) -> int:
    """Bytes on disk of the index folder (the corpus file it points to is not counted)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


class IndexSearcher:
    """A loaded index: encodes the queries of one call as one batch and searches them in one FAISS call.

    Safe to share between threads: encoding is serialised (a fast tokenizer must not be used by two threads at
    once), FAISS and BM25 searches are read-only and FAISS releases the GIL while it searches.
    """

    def __init__(
        self,
        metadata: IndexMetadata,
        corpus: CorpusFile,
        *,
        encoder: Encoder | None,
        faiss_index: Any = None,
        bm25: Any = None,
    ) -> None:
        self.metadata = metadata
        self.corpus = corpus
        self.encoder = encoder
        self.faiss_index = faiss_index
        self.bm25 = bm25
        self._encode_lock = threading.Lock()

    @property
    def kind(self) -> IndexKind:
        return self.metadata.kind

    def encode(self, queries: Sequence[str]) -> npt.NDArray[np.float32]:
        if self.encoder is None:
            raise TypeError(f"a {self.kind} index has no encoder")
        with self._encode_lock:
            return self.encoder.encode_queries(queries)

    def search_vectors(
        self, vectors: npt.NDArray[np.float32], topk: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """FAISS search of already-encoded queries: scores and corpus rows (-1 for an empty slot)."""
        k = min(topk, self.metadata.n_passages)
        scores, rows = self.faiss_index.search(vectors, k)
        return scores, rows

    def search_rows(
        self, queries: Sequence[str], topk: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        if self.bm25 is not None:
            return index_bm25.search(self.bm25, queries, topk, self.metadata.n_passages)
        return self.search_vectors(self.encode(queries), topk)

    def documents(
        self, scores: npt.NDArray[np.float32], rows: npt.NDArray[np.int64]
    ) -> list[list[RetrievedDocument]]:
        results: list[list[RetrievedDocument]] = []
        for query_scores, query_rows in zip(scores, rows, strict=True):
            hits: list[RetrievedDocument] = []
            for score, row in zip(query_scores.tolist(), query_rows.tolist(), strict=True):
                if row >= 0:
                    passage = self.corpus[row]
                    hits.append(RetrievedDocument(passage.id, passage.contents, float(score)))
            results.append(hits)
        return results

    def search(self, queries: Sequence[str], topk: int) -> list[list[RetrievedDocument]]:
        if not queries:
            return []
        scores, rows = self.search_rows(queries, topk)
        return self.documents(scores, rows)


def _check_encoder(metadata: IndexMetadata, encoder: Encoder, folder: Path) -> None:
    if encoder.name != metadata.encoder or encoder.dimension != metadata.dimension:
        raise IndexMismatchError(
            f"index {folder} was built with encoder {metadata.encoder!r} (dimension {metadata.dimension}), "
            f"not {encoder.name!r} (dimension {encoder.dimension})"
        )


def load_index(
    path: Path | str,
    *,
    encoder: Encoder | str | None = None,
    corpus_path: Path | str | None = None,
    verify_corpus: bool = True,
    faiss_threads: int = index_faiss.DEFAULT_FAISS_THREADS,
    use_gpu: bool = False,
    nprobe: int | None = None,
    ef_search: int | None = None,
) -> IndexSearcher:
    """Open an index folder for searching.

    ``encoder`` (an instance or a name) must be the one the index was built with; by default it is loaded from
    the metadata. ``corpus_path`` overrides the recorded one (a moved corpus); with ``verify_corpus`` its sha256
    must match the build's. ``nprobe`` / ``ef_search`` override the tuned values; ``use_gpu`` moves a flat or IVF
    index to every GPU when faiss-gpu is installed.
    """
    folder = Path(path)
    metadata = IndexMetadata.read(folder)
    if encoder == "":  # how a form or a model field spells "no encoder" (BM25)
        encoder = None
    wanted = encoder if isinstance(encoder, str) or encoder is None else encoder.name
    if wanted is not None and wanted != metadata.encoder:
        raise IndexMismatchError(
            f"index {folder} was built with encoder {metadata.encoder!r}, not {wanted!r}"
        )
    source = Path(corpus_path) if corpus_path is not None else Path(metadata.corpus_path)
    if not source.exists():
        raise IndexNotFoundError(
            f"index {folder} reads its passages from {source}, which does not exist (pass corpus_path=)"
        )
    if verify_corpus:
        sha256 = corpus_checksum(source)
        if sha256 != metadata.corpus_sha256:
            raise IndexMismatchError(
                f"corpus {source} has sha256 {sha256}, but index {folder} was built over a corpus with sha256 "
                f"{metadata.corpus_sha256} ({metadata.corpus_path}); rebuild the index"
            )
    offsets = np.load(folder / OFFSETS_FILE)
    corpus = CorpusFile(source, offsets, metadata.corpus_sha256)
    if metadata.kind == "bm25":
        return IndexSearcher(metadata, corpus, encoder=None, bm25=index_bm25.load(folder / BM25_FOLDER))
    loaded = encoder_load(metadata.encoder) if isinstance(encoder, str) or encoder is None else encoder
    _check_encoder(metadata, loaded, folder)
    index_faiss.set_threads(faiss_threads)
    index = index_faiss.read(str(folder / FAISS_FILE))
    breadth = nprobe if metadata.kind == "ivf" else ef_search
    breadth = breadth or metadata.params.get("nprobe") or metadata.params.get("ef_search")
    if breadth:
        index_faiss.set_breadth(index, metadata.kind, int(breadth))
    if use_gpu:
        index = index_faiss.to_gpus(index, metadata.kind)
    return IndexSearcher(metadata, corpus, encoder=loaded, faiss_index=index)
