"""The real shared data set (../shared/data/wiki_multihop), imported whole."""

from __future__ import annotations

import io
import time

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from webapp.corpora.models import Corpus, Passage
from webapp.datasets.models import Dataset, Question

WIKI_MULTIHOP = settings.SHARED_DIR / "data" / "wiki_multihop"


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.skipif(
    not WIKI_MULTIHOP.is_dir(), reason=f"{WIKI_MULTIHOP} not found (set SEARCHLAB_SHARED_DIR)"
)
def test_it_imports_wiki_multihop_well_under_a_minute():
    out = io.StringIO()
    started = time.perf_counter()
    call_command("import_wiki_multihop", stdout=out)
    seconds = time.perf_counter() - started
    assert Corpus.objects.get(name="wiki_multihop").passage_count == 46_615
    assert Passage.objects.count() == 46_615
    assert Dataset.objects.get(name="wiki_multihop").question_count == 5_730
    assert Passage.objects.get(external_id="0").title == "Meet Corliss Archer"
    question = Question.objects.get(external_id="hotpotqa_5a8c7595554299585d9e36b6")
    assert (question.golden_answers, question.data_source) == (["Chief of Protocol"], "hotpotqa")
    assert question.metadata["supporting_titles"] == ["Shirley Temple", "Kiss and Tell (1945 film)"]
    assert Question.objects.filter(data_source="nq").count() == 2_676
    if connection.vendor == "postgresql":
        # A guard against row-by-row inserts (minutes), with room for a slow, busy machine; not a benchmark.
        assert seconds < 120, out.getvalue()
