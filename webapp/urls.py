from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from webapp.runs.views import home

urlpatterns = [
    path("", home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("runs/", include("webapp.runs.urls")),
    path("training/", include("webapp.training.urls")),
    path("trajectories/", include("webapp.trajectories.urls")),
    path("corpora/", include("webapp.corpora.urls")),
    path("", include("webapp.corpora.urls_retrieve")),  # POST /retrieve, Search-R1's retrieval API
    path("datasets/", include("webapp.datasets.urls")),
    path("imports/", include("webapp.imports.urls")),
    path("audits/", include("webapp.audits.urls")),
    path("experiments/", include("webapp.experiments.urls")),
    path("api/v1/", include("webapp.api.urls")),
    path("", include("webapp.evaluation.urls")),  # /evaluation/, /compare/, /api/v1/runs/<id>/report/
]
