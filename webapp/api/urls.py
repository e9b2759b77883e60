from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from webapp.api.api import ScoreApi, ScoreJobDetailApi
from webapp.audits.api import (
    AuditAgreementApi,
    AuditExportCsvApi,
    AuditExportJsonlApi,
    AuditListApi,
    AuditStatusApi,
    FrozenReportApi,
)
from webapp.audits.correction_api import RunCorrectedRatesApi
from webapp.runs.api import RunDetailApi, RunListApi, RunMetricsApi
from webapp.training.api import ExternalRunCreateApi, RunIngestApi, RunIngestTokenApi, RunIngestTokenRevokeApi
from webapp.trajectories.api import (
    StepRewardExportApi,
    StepRewardPageApi,
    TrajectoryDetailApi,
    TrajectoryImportApi,
    TrajectoryListApi,
)

app_name = "api"

urlpatterns = [
    path("runs/", RunListApi.as_view(), name="run-list"),
    path("runs/external/", ExternalRunCreateApi.as_view(), name="run-external"),
    path("runs/<int:run_id>/", RunDetailApi.as_view(), name="run-detail"),
    path("runs/<int:run_id>/metrics/", RunMetricsApi.as_view(), name="run-metrics"),
    path("runs/<int:run_id>/corrected-rates/", RunCorrectedRatesApi.as_view(), name="run-corrected-rates"),
    path("runs/<int:run_id>/ingest/", RunIngestApi.as_view(), name="run-ingest"),
    path("runs/<int:run_id>/ingest-token/", RunIngestTokenApi.as_view(), name="run-ingest-token"),
    path(
        "runs/<int:run_id>/ingest-token/revoke/",
        RunIngestTokenRevokeApi.as_view(),
        name="run-ingest-token-revoke",
    ),
    path("runs/<int:run_id>/step-rewards/", StepRewardPageApi.as_view(), name="run-step-rewards"),
    re_path(
        r"^runs/(?P<run_id>[0-9]+)/step-rewards\.(?P<fmt>jsonl|csv)$",
        StepRewardExportApi.as_view(),
        name="run-step-rewards-export",
    ),
    path("trajectories/", TrajectoryListApi.as_view(), name="trajectory-list"),
    path("trajectories/<int:trajectory_id>/", TrajectoryDetailApi.as_view(), name="trajectory-detail"),
    path("trajectories/import/", TrajectoryImportApi.as_view(), name="trajectory-import"),
    path("audits/", AuditListApi.as_view(), name="audit-list"),
    path("audits/<int:audit_id>/agreement/", AuditAgreementApi.as_view(), name="audit-agreement"),
    path("audits/<int:audit_id>/status/", AuditStatusApi.as_view(), name="audit-status"),
    path("audits/reports/<int:report_id>/", FrozenReportApi.as_view(), name="audit-frozen-report"),
    path("audits/<int:audit_id>/export.jsonl", AuditExportJsonlApi.as_view(), name="audit-export"),
    path(
        "audits/<int:audit_id>/export/<slug:table>.csv",
        AuditExportCsvApi.as_view(),
        name="audit-export-table",
    ),
    re_path(r"^score/?$", ScoreApi.as_view(), name="score"),
    path("score/jobs/<int:job_id>/", ScoreJobDetailApi.as_view(), name="score-job"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api:schema"), name="redoc"),
]
