from django.urls import path

from webapp.runs import views

app_name = "runs"

urlpatterns = [
    path("<int:run_id>/", views.run_detail, name="detail"),
    path("<int:run_id>/status/", views.run_status, name="status"),
    path("<int:run_id>/trajectories/", views.run_trajectories, name="trajectories"),
    path("<int:run_id>/cancel/", views.run_cancel, name="cancel"),
]
