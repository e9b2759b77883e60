"""Reads on corpora."""

from __future__ import annotations

from django.db.models import QuerySet

from webapp.corpora.models import Corpus, Passage


def corpus_list() -> QuerySet[Corpus]:
    return Corpus.objects.prefetch_related("indexes").order_by("name")


def passage_by_external_ids(*, corpus: Corpus, external_ids: list[str]) -> dict[str, Passage]:
    return {p.external_id: p for p in Passage.objects.filter(corpus=corpus, external_id__in=external_ids)}
