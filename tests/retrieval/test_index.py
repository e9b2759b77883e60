from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from retrieval import encoders
from retrieval.api import searcher_for_index
from retrieval.corpus import CorpusFile, Passage
from retrieval.encoders import HashingEncoder, passage_embeddings
from retrieval.index import (
    INDEX_KINDS,
    IndexConfig,
    IndexMetadata,
    IndexMismatchError,
    IndexNotFoundError,
    build_fraction,
    build_index,
    index_size_bytes,
    load_index,
)


@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_it_finds_the_passage_a_query_quotes(
    kind: str, built_indexes: dict[str, Path], tiny_passages: list[Passage]
) -> None:
    searcher = load_index(built_indexes[kind])
    sample = tiny_passages[:60:2]
    results = searcher.search([p.text[:160] for p in sample], 3)
    top1 = sum(hits[0].id == p.id for hits, p in zip(results, sample, strict=True))
    assert top1 >= len(sample) - 2, f"{kind}: {top1}/{len(sample)} at rank 1"
    assert all(len(hits) == 3 for hits in results)
    assert [h.score for h in results[0]] == sorted((h.score for h in results[0]), reverse=True)


@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_it_returns_corpus_rows_as_documents(kind: str, built_indexes: dict[str, Path]) -> None:
    [[hit, *_]] = load_index(built_indexes[kind]).search(["Meet Corliss Archer radio program CBS"], 3)
    assert hit.id == "0"
    assert hit.contents.startswith(
        "Meet Corliss Archer\nMeet Corliss Archer, a program from radio's Golden Age"
    )


def test_it_matches_exact_cosine_search(built_indexes: dict[str, Path], tiny_passages: list[Passage]) -> None:
    encoder = HashingEncoder(256)
    vectors = encoder.encode_passages([p.contents for p in tiny_passages])
    query = "American actress singer diplomat"
    expected = np.argsort(-(vectors @ encoder.encode_queries([query])[0]), kind="stable")[:5]
    [hits] = load_index(built_indexes["flat"]).search([query], 5)
    assert [h.id for h in hits] == [tiny_passages[i].id for i in expected]


def test_it_records_what_the_index_was_built_from(built_indexes: dict[str, Path], tiny_corpus: Path) -> None:
    for kind, folder in built_indexes.items():
        metadata = IndexMetadata.read(folder)
        raw = json.loads((folder / "metadata.json").read_text())
        assert raw["kind"] == kind
        assert metadata.encoder == ("bm25" if kind == "bm25" else "hashing-256")
        assert metadata.dimension == (0 if kind == "bm25" else 256)
        assert metadata.corpus_path == str(tiny_corpus.resolve())
        assert len(metadata.corpus_sha256) == 64
        assert metadata.n_passages == 300
        assert metadata.build_seconds > 0
        assert metadata.searchlab_version == "0.1.0"
        assert index_size_bytes(folder) > 0
    assert IndexMetadata.read(built_indexes["ivf"]).params["nlist"] == 7  # 300 // 39: enough points per list
    assert IndexMetadata.read(built_indexes["hnsw"]).tuning["recall"] >= 0.99


def test_it_round_trips_through_a_moved_folder(built_indexes: dict[str, Path], tmp_path: Path) -> None:
    for kind, folder in built_indexes.items():
        moved = tmp_path / kind
        shutil.copytree(folder, moved)
        before = load_index(folder).search(["Shirley Temple diplomat", "radio comedy"], 4)
        after = load_index(moved).search(["Shirley Temple diplomat", "radio comedy"], 4)
        assert after == before


def test_it_refuses_another_encoder(built_indexes: dict[str, Path]) -> None:
    with pytest.raises(IndexMismatchError, match=r"built with encoder 'hashing-256', not 'hashing-128'"):
        load_index(built_indexes["hnsw"], encoder=HashingEncoder(128))
    with pytest.raises(IndexMismatchError, match=r"'hashing-256', not 'intfloat/e5-base-v2'"):
        load_index(built_indexes["flat"], encoder="intfloat/e5-base-v2")
    with pytest.raises(IndexMismatchError, match=r"built with encoder 'bm25', not 'hashing-256'"):
        load_index(built_indexes["bm25"], encoder="hashing-256")


def test_it_refuses_a_corpus_that_changed(tiny_corpus: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    shutil.copy(tiny_corpus, corpus)
    metadata = build_index(corpus, tmp_path / "index", IndexConfig(kind="flat", encoder="hashing-64"))
    with corpus.open("a") as handle:
        handle.write('{"id": "new", "contents": "Added\\nafter the build"}\n')
    with pytest.raises(IndexMismatchError) as raised:
        load_index(tmp_path / "index")
    assert metadata.corpus_sha256 in str(raised.value)
    assert "rebuild the index" in str(raised.value)
    corpus.unlink()
    with pytest.raises(IndexNotFoundError, match="does not exist"):
        load_index(tmp_path / "index")
    moved = load_index(tmp_path / "index", corpus_path=tiny_corpus)
    [[hit]] = moved.search(
        ["Meet Corliss Archer, a program from radio's Golden Age, ran from January 7, 1943"], 1
    )
    assert hit.id == "0"


def test_it_reports_progress_by_stage(tiny_corpus: Path, tmp_path: Path) -> None:
    seen: list[str] = []
    build_index(
        tiny_corpus,
        tmp_path / "ivf",
        IndexConfig(kind="ivf", encoder="hashing-64"),
        progress=lambda stage, done, total: seen.append(stage),
    )
    assert list(dict.fromkeys(seen)) == ["scan", "encode", "index", "tune", "save"]


def test_it_leaves_no_half_index_when_a_build_fails(tiny_corpus: Path, tmp_path: Path) -> None:
    class Broken(HashingEncoder):
        def encode_passages(self, texts, progress=None):  # type: ignore[no-untyped-def]
            raise RuntimeError("encoder crashed")

    with pytest.raises(RuntimeError, match="encoder crashed"):
        build_index(tiny_corpus, tmp_path / "index", IndexConfig(kind="flat"), encoder=Broken(64))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(IndexNotFoundError, match=r"metadata\.json is missing"):
        load_index(tmp_path / "index")


@pytest.mark.parametrize(
    ("kind", "queries", "topk", "expected_lengths"),
    [
        # More than the corpus holds: every passage, once.
        ("flat", ["radio"], 1000, [300]),
        # No query, no search.
        ("hnsw", [], 3, []),
        # BM25 returns only passages sharing a word with the query.
        ("bm25", ["zzzqqq xxyyzz"], 3, [0]),
    ],
)
def test_it_handles_edge_cases(
    built_indexes: dict[str, Path], kind: str, queries: list[str], topk: int, expected_lengths: list[int]
) -> None:
    results = load_index(built_indexes[kind]).search(queries, topk)
    assert [len(hits) for hits in results] == expected_lengths


def test_it_rejects_an_unknown_kind(tiny_corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kind must be one of flat, ivf, hnsw, bm25; got 'annoy'"):
        build_index(tiny_corpus, tmp_path / "x", IndexConfig(kind="annoy"))  # type: ignore[arg-type]


def test_it_caches_embeddings_by_corpus_and_encoder(
    tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(encoders, "ENCODE_BLOCK", 7)  # several blocks, the last one short
    corpus = CorpusFile.scan(tiny_corpus)
    fresh, seconds = passage_embeddings(HashingEncoder(64), corpus, cache_dir=tmp_path)
    assert seconds > 0
    assert np.array_equal(fresh, HashingEncoder(64).encode_passages(list(corpus.iter_contents())))
    again, seconds = passage_embeddings(HashingEncoder(64), corpus, cache_dir=tmp_path)
    assert seconds == 0 and np.array_equal(again, fresh)
    passage_embeddings(HashingEncoder(32), corpus, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("hashing-*.npy"))) == 2  # one file per encoder, no partial left behind


def test_it_keeps_one_loaded_searcher_per_index_until_it_is_rebuilt(
    tiny_corpus: Path, tmp_path: Path
) -> None:
    build_index(tiny_corpus, tmp_path / "i", IndexConfig(kind="flat", encoder="hashing-32"))
    first = searcher_for_index(tmp_path / "i")
    assert searcher_for_index(str(tmp_path / "i")) is first
    build_index(tiny_corpus, tmp_path / "i", IndexConfig(kind="flat", encoder="hashing-64"))
    assert searcher_for_index(tmp_path / "i").metadata.encoder == "hashing-64"


@pytest.mark.parametrize(
    ("stage", "done", "total", "fraction"),
    [
        # Nothing known yet.
        ("scan", 0, 0, 0.0),
        # Half the passages encoded: encoding spans 5%..85% of a build.
        ("encode", 500, 1000, 0.45),
        # Done.
        ("save", 1, 1, 1.0),
        # A count past its total never overshoots the stage.
        ("index", 12, 10, 0.95),
    ],
)
def test_it_turns_stages_into_one_fraction(stage: str, done: int, total: int, fraction: float) -> None:
    assert build_fraction(stage, done, total) == fraction


def test_it_loads_bm25_when_the_encoder_is_blank(built_indexes: dict[str, Path]) -> None:
    assert load_index(built_indexes["bm25"], encoder="").kind == "bm25"
