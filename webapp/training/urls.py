from django.urls import path

from webapp.training import views

app_name = "training"

urlpatterns = [
    path("new/", views.training_run_new, name="new"),
]
