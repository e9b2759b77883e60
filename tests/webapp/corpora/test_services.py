from __future__ import annotations

import json

import pytest

from webapp.common.importing import DataImportError
from webapp.corpora.models import Corpus, Passage
from webapp.corpora.services import corpus_import, split_contents

pytestmark = pytest.mark.django_db


def _write(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


@pytest.mark.parametrize(
    ("contents", "expected"),
    [
        ("Paris\nParis is the capital.", ("Paris", "Paris is the capital.")),
        ('"Aaron"\nAaron is a prophet.', ("Aaron", "Aaron is a prophet.")),  # the 2018 dump quotes titles
        ("no title at all", ("", "no title at all")),  # a passage without a title line keeps all its text
        ("T\nline one\nline two", ("T", "line one\nline two")),  # only the first newline separates the title
    ],
)
def test_it_splits_flashrag_contents(contents, expected):
    assert split_contents(contents) == expected


def test_it_imports_a_flashrag_corpus(tmp_path):
    path = _write(
        tmp_path / "c.jsonl",
        [{"id": "0", "contents": "Paris\nCapital of France."}, {"id": 1, "contents": "Lyon\nA city."}],
    )
    corpus = corpus_import(name="tiny", path=path)
    assert corpus.passage_count == 2
    assert list(Passage.objects.order_by("external_id").values_list("external_id", "title", "text")) == [
        ("0", "Paris", "Capital of France."),
        ("1", "Lyon", "A city."),
    ]


@pytest.mark.parametrize(
    ("bad_line", "field", "message"),
    [
        ("{not json", None, "invalid JSON"),
        ({"id": "9"}, "contents", "missing"),
        ({"id": "0", "contents": "dup\nlicate"}, "id", "duplicate id '0' (first on line 1)"),
        ({"id": ["x"], "contents": "T\nx"}, "id", "expected a string"),
    ],
)
def test_it_rolls_back_on_a_bad_line_naming_file_line_and_field(tmp_path, bad_line, field, message):
    path = _write(
        tmp_path / "c.jsonl",
        [{"id": "0", "contents": "Paris\nok"}, {"id": "1", "contents": "L\nok"}, bad_line],
    )
    with pytest.raises(DataImportError) as caught:
        corpus_import(name="broken", path=path)
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), 3, field)
    assert message in str(caught.value)
    assert not Corpus.objects.exists()
    assert not Passage.objects.exists()


def test_it_refuses_a_second_corpus_of_the_same_name(tmp_path):
    path = _write(tmp_path / "c.jsonl", [{"id": "0", "contents": "Paris\nok"}])
    corpus_import(name="tiny", path=path)
    with pytest.raises(DataImportError, match="a corpus named 'tiny' exists"):
        corpus_import(name="tiny", path=path)
