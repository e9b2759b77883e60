from django.urls import path

from webapp.corpora import retrieve, views

app_name = "corpora"

urlpatterns = [
    path("", views.corpus_index, name="list"),
    path("<int:corpus_id>/indexes/", views.index_new, name="index_new"),
    path("indexes/<int:index_id>/", views.index_detail, name="index_detail"),
    path("indexes/<int:index_id>/status/", views.index_status, name="index_status"),
    path("indexes/<int:index_id>/rebuild/", views.index_rebuild_view, name="index_rebuild"),
    path("indexes/<int:index_id>/delete/", views.index_delete_view, name="index_delete"),
    path("indexes/<int:index_id>/search/", views.index_search, name="index_search"),
    # Search-R1's API pinned to one index: what a training run should point at (no trailing slash, as /retrieve).
    path("indexes/<int:index_id>/retrieve", retrieve.index_retrieve, name="index_retrieve"),
    path("passages/<int:passage_id>/", views.passage_detail, name="passage_detail"),
]
