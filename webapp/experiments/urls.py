from django.urls import path

from webapp.experiments import views

app_name = "experiments"

urlpatterns = [
    path("", views.experiment_index, name="index"),
    path("<int:experiment_id>/", views.experiment_detail, name="detail"),
    path("<int:experiment_id>/resume/", views.experiment_resume, name="resume"),
]
