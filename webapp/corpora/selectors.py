"""Reads on corpora, passages and indexes."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Prefetch, QuerySet

from webapp.corpora.models import Corpus, Index, Passage


def corpus_list() -> QuerySet[Corpus]:
    indexes = Index.objects.order_by("-created_at")
    return Corpus.objects.prefetch_related(Prefetch("indexes", queryset=indexes)).order_by("name")


def passage_by_external_ids(*, corpus: Corpus, external_ids: list[str]) -> dict[str, Passage]:
    return {p.external_id: p for p in Passage.objects.filter(corpus=corpus, external_id__in=external_ids)}


def index_get(*, index_id: int) -> Index | None:
    return Index.objects.select_related("corpus").filter(pk=index_id).first()


def index_fusable_with(*, index: Index) -> QuerySet[Index]:
    """The other ready indexes of the same corpus: candidates for a hybrid search with ``index``."""
    return (
        Index.objects.filter(corpus_id=index.corpus_id, status=Index.Status.READY)
        .exclude(pk=index.pk)
        .select_related("corpus")
        .order_by("name")
    )


def index_served_at_retrieve() -> Index | None:
    """The index ``POST /retrieve`` answers from: settings.RETRIEVE_INDEX, else the most recently built ready one."""
    ready = Index.objects.select_related("corpus").filter(status=Index.Status.READY)
    if settings.RETRIEVE_INDEX:
        return ready.filter(pk=settings.RETRIEVE_INDEX).first()
    return ready.order_by("-finished_at", "-pk").first()
