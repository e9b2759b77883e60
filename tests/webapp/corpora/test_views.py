"""The corpora page (build form, progress polled by htmx), the index page (try a query), the passage page."""

from __future__ import annotations

import re
from unittest import mock

import pytest
from django.test import Client

from webapp.corpora.models import Index, Passage
from webapp.corpora.tasks import index_build_task

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def _templates(response) -> list[str]:
    return [t.name for t in response.templates]


def test_it_lists_corpora_with_their_indexes_and_a_build_form(researcher_client, dense_index):
    response = researcher_client.get("/corpora/")

    assert response.status_code == 200
    assert "corpora/corpus_list.html" in _templates(response)
    html = response.content.decode()
    assert f'href="/corpora/indexes/{dense_index.pk}/"' in html
    assert f'action="/corpora/{dense_index.corpus_id}/indexes/"' in html
    assert '<option value="sentence-transformers/all-MiniLM-L6-v2" selected>' in html  # the offline default


def test_it_creates_an_index_and_enqueues_its_build(
    researcher_client, corpus, django_capture_on_commit_callbacks
):
    with (
        mock.patch.object(index_build_task, "delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = researcher_client.post(f"/corpora/{corpus.pk}/indexes/", {"kind": "bm25", "encoder": ""})

    index = Index.objects.get()
    assert response.status_code == 302 and response.url == "/corpora/"
    assert (index.kind, index.encoder, index.status) == ("bm25", "", "pending")
    delay.assert_called_once_with(index.pk)


def test_it_shows_build_form_errors(researcher_client, dense_index):
    response = researcher_client.post(
        f"/corpora/{dense_index.corpus_id}/indexes/",
        {"kind": "flat", "encoder": "hashing-256", "name": "hnsw-hashing"},
    )

    assert response.status_code == 400
    assert "already has an index named &#x27;hnsw-hashing&#x27;" in response.content.decode()
    assert Index.objects.count() == 1


def test_it_polls_a_building_index_every_second_with_its_stage(researcher_client, dense_index):
    Index.objects.filter(pk=dense_index.pk).update(status="building", stage="encode", progress=0.45)

    response = researcher_client.get(f"/corpora/indexes/{dense_index.pk}/status/", **HTMX)

    assert response.status_code == 200
    assert _templates(response) == ["corpora/_index_status.html"]
    html = response.content.decode()
    assert 'hx-trigger="every 1s"' in html
    assert '<progress max="1" value="0.4500">' in html and "45% · encoding passages" in html


def test_it_stops_polling_when_the_build_ends(researcher_client, dense_index):
    response = researcher_client.get(f"/corpora/indexes/{dense_index.pk}/status/", **HTMX)

    assert "hx-trigger" not in response.content.decode()
    assert "HX-Refresh" not in response  # the list page just shows the final state


def test_it_reloads_the_index_page_when_its_build_ends(researcher_client, dense_index):
    response = researcher_client.get(f"/corpora/indexes/{dense_index.pk}/status/?refresh=1", **HTMX)

    assert response["HX-Refresh"] == "true"  # so the try-a-query form appears


def test_it_shows_why_a_build_failed(researcher_client, dense_index):
    Index.objects.filter(pk=dense_index.pk).update(status="failed", error="CorpusError: c.jsonl:2: bad")

    response = researcher_client.get("/corpora/")

    assert '<pre class="error">CorpusError: c.jsonl:2: bad</pre>' in response.content.decode()


def test_it_shows_an_index_with_its_try_a_query_form(researcher_client, dense_index, bm25_index):
    response = researcher_client.get(f"/corpora/indexes/{dense_index.pk}/")

    assert response.status_code == 200
    assert "corpora/index_detail.html" in _templates(response)
    html = response.content.decode()
    assert f'hx-post="/corpora/indexes/{dense_index.pk}/search/"' in html
    assert f"POST http://testserver/corpora/indexes/{dense_index.pk}/retrieve" in html
    assert f'<option value="{bm25_index.pk}">bm25 (BM25)</option>' in html  # a hybrid partner


def _csrf_client(user) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client, client.get("/corpora/").cookies["csrftoken"].value


def test_it_searches_with_an_htmx_post_carrying_the_csrf_token(researcher, dense_index):
    client, token = _csrf_client(researcher)

    refused = client.post(f"/corpora/indexes/{dense_index.pk}/search/", {"query": "radio", "topk": 3}, **HTMX)
    response = client.post(
        f"/corpora/indexes/{dense_index.pk}/search/",
        {"query": "Which radio program aired on CBS?", "topk": 3},
        HTTP_X_CSRFTOKEN=token,  # what base.html's hx-headers sends with every htmx request
        **HTMX,
    )

    assert refused.status_code == 403
    assert response.status_code == 200
    assert _templates(response) == ["corpora/_search_results.html"]
    html = response.content.decode()
    assert len(re.findall(r"<strong>Doc \d\(Title: ", html)) == 3 and "<strong>Doc 1(Title: " in html
    first_id = re.search(r'href="/corpora/passages/(\d+)/"', html).group(1)
    assert Passage.objects.get(pk=first_id).corpus_id == dense_index.corpus_id


def test_it_fuses_a_dense_and_a_bm25_index(researcher_client, dense_index, bm25_index):
    response = researcher_client.post(
        f"/corpora/indexes/{dense_index.pk}/search/",
        {"query": "radio program", "topk": 4, "fuse_with": bm25_index.pk},
        **HTMX,
    )

    assert response.status_code == 200
    assert "fused with bm25 (RRF score)" in response.content.decode()
    assert len(response.context["hits"]) == 4


def test_it_refuses_to_fuse_indexes_of_different_corpus_bytes(researcher_client, dense_index, bm25_index):
    Index.objects.filter(pk=bm25_index.pk).update(metadata={**bm25_index.metadata, "corpus_sha256": "0" * 64})

    response = researcher_client.post(
        f"/corpora/indexes/{dense_index.pk}/search/",
        {"query": "radio", "topk": 3, "fuse_with": bm25_index.pk},
        **HTMX,
    )

    assert response.status_code == 409
    assert "built over different versions of the corpus file" in response.content.decode()


def test_it_shows_query_errors_in_the_fragment(researcher_client, dense_index):
    response = researcher_client.post(
        f"/corpora/indexes/{dense_index.pk}/search/", {"query": "", "topk": 99}, **HTMX
    )

    assert response.status_code == 400
    assert "Ensure this value is less than or equal to 50." in response.content.decode()


def test_it_shows_a_passage(researcher_client, corpus):
    passage = Passage.objects.filter(corpus=corpus).order_by("pk").first()

    response = researcher_client.get(f"/corpora/passages/{passage.pk}/")

    assert response.status_code == 200
    assert "corpora/passage_detail.html" in _templates(response)
    assert f"<code>{passage.external_id}</code>" in response.content.decode()


def test_it_keeps_annotators_out(annotator_client, dense_index):
    assert annotator_client.get(f"/corpora/indexes/{dense_index.pk}/").status_code == 403
