from django.urls import path

from webapp.corpora import views

app_name = "corpora"

urlpatterns = [path("", views.corpus_index, name="list")]
