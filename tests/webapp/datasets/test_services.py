from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from webapp.common.importing import DataImportError
from webapp.datasets.models import Dataset, Question
from webapp.datasets.services import dataset_import

pytestmark = pytest.mark.django_db


def _flashrag(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_it_imports_a_flashrag_dataset(tmp_path):
    path = _flashrag(
        tmp_path / "q.jsonl",
        [
            {
                "id": "nq_1",
                "question": "capital of france?",
                "golden_answers": ["Paris"],
                "metadata": {"data_source": "nq", "split": "test"},
            },
            {"id": "hp_2", "question": "who?", "golden_answers": ["A", "B"]},
        ],
    )
    dataset = dataset_import(name="tiny", path=path)
    assert dataset.question_count == 2
    first = Question.objects.get(external_id="nq_1")
    assert (first.text, first.golden_answers, first.data_source, first.metadata["split"]) == (
        "capital of france?",
        ["Paris"],
        "nq",
        "test",
    )
    assert Question.objects.get(external_id="hp_2").golden_answers == ["A", "B"]


def test_it_names_the_line_and_field_of_a_bad_question_and_keeps_nothing(tmp_path):
    path = _flashrag(
        tmp_path / "q.jsonl",
        [
            {"id": "1", "question": "q?", "golden_answers": ["a"]},
            {"id": "2", "question": "q?", "golden_answers": {"not": "a list"}},
        ],
    )
    with pytest.raises(DataImportError, match=r"q.jsonl, line 2: field 'golden_answers': expected a list"):
        dataset_import(name="tiny", path=path)
    assert not Dataset.objects.exists()


def _search_r1_parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _search_r1_row(index, question, target, source="nq"):
    prompt = (
        "Answer the given question. You must conduct reasoning inside <think> and </think> first ... "
        f"Question: {question}\n"
    )
    return {
        "data_source": source,
        "prompt": [{"role": "user", "content": prompt}],
        "ability": "fact-reasoning",
        "reward_model": {"style": "rule", "ground_truth": {"target": target}},
        "extra_info": {"split": "test", "index": index},
    }


def test_it_imports_search_r1_parquet(tmp_path):
    path = _search_r1_parquet(
        tmp_path / "test.parquet",
        [
            _search_r1_row(0, "who wrote hamlet?", ["Shakespeare", "William Shakespeare"]),
            _search_r1_row(1, "capital of france?", ["Paris"], source="hotpotqa"),
        ],
    )
    dataset = dataset_import(name="sr1", path=path, file_format="search_r1")
    assert dataset.question_count == 2
    question = Question.objects.get(external_id="nq_0")
    assert question.text == "who wrote hamlet?"
    assert question.golden_answers == ["Shakespeare", "William Shakespeare"]
    assert question.data_source == "nq"
    assert question.metadata["prompt"].startswith("Answer the given question.")
    assert Question.objects.filter(external_id="hotpotqa_1").exists()


def test_it_names_the_row_and_nested_field_of_a_bad_parquet_row(tmp_path):
    good = _search_r1_row(0, "q?", ["a"])
    bad = _search_r1_row(1, "q?", ["a"])
    bad["reward_model"] = {"style": "rule", "ground_truth": {"target": []}}
    path = _search_r1_parquet(tmp_path / "bad.parquet", [good, bad])
    with pytest.raises(DataImportError, match=r"line 2: field 'reward_model.ground_truth.target'"):
        dataset_import(name="sr1", path=path, file_format="search_r1")
    assert not Question.objects.exists()


def test_it_rejects_a_file_that_is_not_parquet(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_text("hello")
    with pytest.raises(DataImportError, match="not a parquet file"):
        dataset_import(name="sr1", path=path, file_format="search_r1")
