from django.urls import path

from webapp.datasets import views

app_name = "qa_datasets"

urlpatterns = [path("", views.dataset_index, name="list")]
