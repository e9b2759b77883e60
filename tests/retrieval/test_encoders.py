from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retrieval.encoders import EncoderError, HashingEncoder, encoder_load, model_prefixes
from retrieval.index import IndexConfig, build_index, load_index


@pytest.mark.parametrize(
    ("name", "prefixes"),
    [
        # E5 (Search-R1's retriever) takes both prefixes.
        ("intfloat/e5-base-v2", ("query: ", "passage: ")),
        # Multilingual E5 too, and a local folder named after it.
        ("/models/multilingual-e5-small", ("query: ", "passage: ")),
        # English BGE v1.5: an instruction on queries only.
        ("BAAI/bge-base-en-v1.5", ("Represent this sentence for searching relevant passages: ", "")),
        # BGE-M3 takes no instruction.
        ("BAAI/bge-m3", ("", "")),
        # MiniLM: none; a name merely containing "e5" letters is not E5.
        ("sentence-transformers/all-MiniLM-L6-v2", ("", "")),
        ("acme/retriever-e5x", ("", "")),
    ],
)
def test_it_prefixes_by_model_family(name: str, prefixes: tuple[str, str]) -> None:
    assert model_prefixes(name) == prefixes


def test_it_hashes_words_deterministically_across_processes() -> None:
    vector = HashingEncoder(32).encode_queries(["Paris is the capital"])[0]
    code = "from retrieval.encoders import HashingEncoder; print(list(HashingEncoder(32).encode_queries(['Paris is the capital'])[0]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert np.allclose(vector, eval(out, {"np": np}))
    assert np.linalg.norm(vector) == pytest.approx(1.0)


@pytest.mark.slow
def test_it_retrieves_with_the_bundled_minilm_offline(tiny_corpus: Path, tmp_path: Path) -> None:
    encoder = encoder_load("sentence-transformers/all-MiniLM-L6-v2")
    assert (encoder.name, encoder.dimension) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    vectors = encoder.encode_queries(["who played Corliss Archer", "capital of France"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)

    small = tmp_path / "small.jsonl"
    small.write_text("".join(tiny_corpus.read_text().splitlines(keepends=True)[:20]))
    build_index(small, tmp_path / "flat", IndexConfig(kind="flat"), encoder=encoder)
    searcher = load_index(tmp_path / "flat", encoder=encoder)
    [hits] = searcher.search(["Which American actress became a diplomat and ambassador?"], 3)
    assert "Shirley Temple" in [h.contents.partition("\n")[0] for h in hits]


@pytest.mark.slow
def test_it_refuses_a_model_it_would_have_to_download() -> None:
    with pytest.raises(EncoderError, match=r"cannot load encoder 'no-such-org/no-such-model-xyz' .* offline"):
        encoder_load("no-such-org/no-such-model-xyz")
