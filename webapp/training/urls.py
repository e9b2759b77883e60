from django.urls import path

from webapp.training import views

app_name = "training"

urlpatterns = [
    path("new/", views.training_run_new, name="new"),
    path("warm-start/", views.warm_start_new, name="warm_start"),
    path("runs/<int:run_id>/ingest-tokens/revoke/", views.ingest_tokens_revoke, name="revoke_tokens"),
]
