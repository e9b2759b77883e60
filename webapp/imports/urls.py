from django.urls import path

from webapp.imports import views

app_name = "imports"

urlpatterns = [
    path("", views.import_page, name="page"),
    path("jobs/", views.import_jobs, name="jobs"),
]
