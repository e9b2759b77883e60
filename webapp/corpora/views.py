from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.corpora.selectors import corpus_list


def corpus_index(request: HttpRequest) -> HttpResponse:
    return render(request, "corpora/corpus_list.html", {"corpora": corpus_list()})
