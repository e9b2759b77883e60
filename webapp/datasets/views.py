from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.datasets.selectors import dataset_list


def dataset_index(request: HttpRequest) -> HttpResponse:
    return render(request, "datasets/dataset_list.html", {"datasets": dataset_list()})
