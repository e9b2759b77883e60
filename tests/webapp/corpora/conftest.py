"""A few hundred real passages and indexes over them, built once per session with the model-free hashing encoder.

The passages are the first rows of ../shared/data/wiki_multihop/corpus.jsonl (SEARCHLAB_SHARED_DIR), or the demo
corpus on a machine without the shared data.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from retrieval.index import IndexConfig, build_index
from webapp.corpora.models import Corpus, Index
from webapp.corpora.services import corpus_import, index_register_ready

N_PASSAGES = 300
ENCODER = "hashing-256"


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = Path(settings.SHARED_DIR) / "data" / "wiki_multihop" / "corpus.jsonl"
    if not source.exists():
        source = Path(settings.BASE_DIR) / "demo" / "corpus.jsonl"
    target = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    with source.open(encoding="utf-8") as rows, target.open("w", encoding="utf-8") as out:
        for number, line in enumerate(rows):
            if number == N_PASSAGES:
                break
            out.write(line)
    return target


@pytest.fixture(scope="session")
def index_folders(corpus_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A dense (HNSW over hashing-256) and a BM25 index folder of the corpus file."""
    root = tmp_path_factory.mktemp("indexes")
    build_index(corpus_file, root / "hnsw", IndexConfig(kind="hnsw", encoder=ENCODER, build_threads=1))
    build_index(corpus_file, root / "bm25", IndexConfig(kind="bm25"))
    return {"hnsw": root / "hnsw", "bm25": root / "bm25"}


@pytest.fixture
def corpus(db, corpus_file: Path) -> Corpus:
    return corpus_import(name="tiny-wiki", path=corpus_file)


def ready_index(corpus: Corpus, folder: Path, *, name: str) -> Index:
    """An Index row for a folder built outside the worker, as index_build would have left it."""
    return index_register_ready(corpus=corpus, folder=folder, name=name)


@pytest.fixture
def dense_index(corpus: Corpus, index_folders: dict[str, Path]) -> Index:
    return ready_index(corpus, index_folders["hnsw"], name="hnsw-hashing")


@pytest.fixture
def bm25_index(corpus: Corpus, index_folders: dict[str, Path]) -> Index:
    return ready_index(corpus, index_folders["bm25"], name="bm25")
