"""Corpora and their indexes: build an index (progress polled by htmx), try a query, read a passage."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from webapp.corpora.forms import IndexBuildForm, TryQueryForm
from webapp.corpora.models import Corpus, Index, Passage
from webapp.corpora.searchers import IndexNotReady, NotFusable, index_try_query
from webapp.corpora.selectors import corpus_list, index_fusable_with, index_get
from webapp.corpora.services import IndexBusyError, index_create, index_delete, index_rebuild


def _corpus_page(request: HttpRequest, invalid: IndexBuildForm | None = None) -> HttpResponse:
    corpora = list(corpus_list())
    for corpus in corpora:
        bound = invalid is not None and invalid.corpus.pk == corpus.pk
        corpus.build_form = invalid if bound else IndexBuildForm(corpus=corpus, auto_id=f"c{corpus.pk}-%s")  # type: ignore[attr-defined]
    return render(request, "corpora/corpus_list.html", {"corpora": corpora}, status=400 if invalid else 200)


@require_GET
def corpus_index(request: HttpRequest) -> HttpResponse:
    return _corpus_page(request)


@require_POST
def index_new(request: HttpRequest, corpus_id: int) -> HttpResponse:
    corpus = get_object_or_404(Corpus, pk=corpus_id)
    form = IndexBuildForm(request.POST, corpus=corpus, auto_id=f"c{corpus.pk}-%s")
    if not form.is_valid():
        return _corpus_page(request, invalid=form)
    index = index_create(
        corpus=corpus, kind=form.cleaned_data["kind"], encoder=form.cleaned_data["encoder"],
        name=form.cleaned_data["name"],
    )  # fmt: skip
    messages.success(request, f"Index {index.name} is queued for building on the retrieval queue.")
    return redirect("corpora:list")


def _index_or_404(index_id: int) -> Index:
    index = index_get(index_id=index_id)
    if index is None:
        raise Http404("no such index")
    return index


@require_GET
def index_detail(request: HttpRequest, index_id: int) -> HttpResponse:
    index = _index_or_404(index_id)
    form = TryQueryForm(fusable=index_fusable_with(index=index))
    return render(request, "corpora/index_detail.html", {"index": index, "form": form, "refresh": True})


@require_GET
def index_status(request: HttpRequest, index_id: int) -> HttpResponse:
    """The polled fragment. ``?refresh=1`` (the index page) reloads the page once the build ends, so the
    try-a-query form appears; the list page just stops polling."""
    index = _index_or_404(index_id)
    refresh = request.GET.get("refresh") == "1"
    response = render(request, "corpora/_index_status.html", {"index": index, "refresh": refresh})
    if refresh and not index.is_active and request.htmx:
        response["HX-Refresh"] = "true"
    return response


@require_POST
def index_search(request: HttpRequest, index_id: int) -> HttpResponse:
    index = _index_or_404(index_id)
    form = TryQueryForm(request.POST, fusable=index_fusable_with(index=index))
    context: dict[str, object] = {"index": index, "form": form}
    status = 200
    if not form.is_valid():
        status = 400
    else:
        try:
            context["hits"], context["seconds"] = index_try_query(
                index=index,
                query=form.cleaned_data["query"],
                topk=form.cleaned_data["topk"],
                fuse_with=form.cleaned_data["fuse_with"],
            )
        except (IndexNotReady, NotFusable) as error:
            context["search_error"], status = str(error), 409
    template = "corpora/_search_results.html" if request.htmx else "corpora/index_detail.html"
    return render(request, template, context, status=status)


@require_GET
def passage_detail(request: HttpRequest, passage_id: int) -> HttpResponse:
    passage = get_object_or_404(Passage.objects.select_related("corpus"), pk=passage_id)
    return render(request, "corpora/passage_detail.html", {"passage": passage})


@require_POST
def index_rebuild_view(request: HttpRequest, index_id: int) -> HttpResponse:
    _index_or_404(index_id)
    try:
        index = index_rebuild(index_id=index_id)
    except IndexBusyError as exc:
        messages.error(request, str(exc))
        return redirect("corpora:index_detail", index_id=index_id)
    messages.success(request, f"Index {index.name} is queued for rebuilding on the retrieval queue.")
    return redirect("corpora:index_detail", index_id=index_id)


@require_POST
def index_delete_view(request: HttpRequest, index_id: int) -> HttpResponse:
    _index_or_404(index_id)
    try:
        name = index_delete(index_id=index_id)
    except IndexBusyError as exc:
        messages.error(request, str(exc))
        return redirect("corpora:index_detail", index_id=index_id)
    messages.success(request, f"Index {name} and its folder are deleted.")
    return redirect("corpora:list")
