from django.urls import path
from django.views.generic import RedirectView

from webapp.runs import views

app_name = "runs"

urlpatterns = [
    # The list lives at the site's root; /runs/ is where a user looks for it.
    path("", RedirectView.as_view(pattern_name="home"), name="list"),
    path("<int:run_id>/", views.run_detail, name="detail"),
    path("<int:run_id>/status/", views.run_status, name="status"),
    path("<int:run_id>/trajectories/", views.run_trajectories, name="trajectories"),
    path("<int:run_id>/cancel/", views.run_cancel, name="cancel"),
]
