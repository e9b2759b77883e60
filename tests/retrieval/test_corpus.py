from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.corpus import CorpusError, CorpusFile, Passage, corpus_checksum, read_corpus


def test_it_streams_the_real_corpus_rows(tiny_corpus: Path, tiny_passages: list[Passage]) -> None:
    assert len(tiny_passages) == 300
    assert tiny_passages[0] == Passage("0", tiny_passages[0].contents)
    assert tiny_passages[0].title == "Meet Corliss Archer"
    assert tiny_passages[0].text.startswith("Meet Corliss Archer, a program from radio's Golden Age")


def test_it_reads_rows_by_number_through_offsets(tiny_corpus: Path, tiny_passages: list[Passage]) -> None:
    corpus = CorpusFile.scan(tiny_corpus)
    assert len(corpus) == len(tiny_passages)
    assert corpus.sha256 == corpus_checksum(tiny_corpus)
    for row in (0, 1, 150, 299):
        assert corpus[row] == tiny_passages[row]
    corpus.close()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # Not JSON at all.
        ("{not json", "not valid JSON"),
        # JSON, but not an object.
        ('["0", "Title\\ntext"]', "expected a JSON object, got list"),
        # The id is missing.
        ('{"contents": "Title\\ntext"}', "field 'id' is missing"),
        # The contents are missing (some dumps call it "text").
        ('{"id": "7", "text": "Title\\ntext"}', "field 'contents' is missing"),
        # contents must be a string.
        ('{"id": "7", "contents": ["Title", "text"]}', "field 'contents' must be a string, got list"),
        # A boolean is not an id.
        ('{"id": true, "contents": "Title\\ntext"}', "field 'id' must be a string, got bool"),
    ],
)
def test_it_names_file_line_and_field_of_a_bad_row(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"id": "1", "contents": "Paris\nCapital of France."})
    path.write_text(f"{good}\n\n{line}\n")  # the bad row is on line 3, after a blank line
    with pytest.raises(CorpusError, match=rf"bad\.jsonl:3: .*{message}"):
        list(read_corpus(path))
    with pytest.raises(CorpusError, match=rf"bad\.jsonl:3: .*{message}"):
        CorpusFile.scan(path)


def test_it_keeps_an_integer_id_as_a_string(tmp_path: Path) -> None:
    path = tmp_path / "ints.jsonl"
    path.write_text('{"id": 12, "contents": "Only a title"}\n')
    [passage] = read_corpus(path)
    assert passage == Passage("12", "Only a title")
    assert passage.text == ""
