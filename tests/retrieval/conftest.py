"""Fixtures of the retrieval tests: a few hundred real passages from wiki_multihop, indexes built over them."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.corpus import Passage, read_corpus
from retrieval.encoders import HashingEncoder
from retrieval.index import INDEX_KINDS, IndexConfig, build_index
from tests.conftest import shared_dir

TINY_CORPUS_ROWS = 300


@pytest.fixture(scope="session")
def wiki_corpus_path() -> Path:
    path = shared_dir() / "data" / "wiki_multihop" / "corpus.jsonl"
    if not path.exists():
        pytest.fail(f"wiki_multihop corpus not found at {path}; set SEARCHLAB_SHARED_DIR")
    return path


@pytest.fixture(scope="session")
def tiny_corpus(wiki_corpus_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first rows of the real corpus, in a temporary file (never in the repository)."""
    path = tmp_path_factory.mktemp("corpus") / "tiny.jsonl"
    with wiki_corpus_path.open("rb") as source, path.open("wb") as target:
        for _, line in zip(range(TINY_CORPUS_ROWS), source, strict=False):
            target.write(line)
    return path


@pytest.fixture(scope="session")
def tiny_passages(tiny_corpus: Path) -> list[Passage]:
    return list(read_corpus(tiny_corpus))


@pytest.fixture(scope="session")
def encoder() -> HashingEncoder:
    return HashingEncoder(256)


@pytest.fixture(scope="session")
def built_indexes(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One index of every kind over the tiny corpus, with the hashing encoder."""
    root = tmp_path_factory.mktemp("indexes")
    folders = {}
    for kind in INDEX_KINDS:
        build_index(tiny_corpus, root / kind, IndexConfig(kind=kind, encoder="hashing-256"))
        folders[kind] = root / kind
    return folders
