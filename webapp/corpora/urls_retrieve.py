"""``POST /retrieve`` at the site root, where Search-R1's scripts expect it (included by webapp/urls.py)."""

from django.urls import path

from webapp.corpora import retrieve

urlpatterns = [path("retrieve", retrieve.default_retrieve, name="retrieve")]
