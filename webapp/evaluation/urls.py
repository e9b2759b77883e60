"""Included at the site root: the pages under /evaluation/, the compare page, and the report API under /api/v1/."""

from django.urls import path

from webapp.evaluation import views
from webapp.evaluation.api import RunReportApi
from webapp.evaluation.judge_cost import RunJudgePriceApi
from webapp.evaluation.rejudge_views import RejudgeJobApi, RunRejudgeApi, rejudge_fragment, rejudge_start

app_name = "evaluation"

urlpatterns = [
    path("evaluation/", views.evaluation_index, name="index"),
    path("evaluation/new/", views.evaluation_new, name="new"),
    path("evaluation/runs/<int:run_id>/report/", views.evaluation_report, name="report"),
    path(
        "evaluation/runs/<int:run_id>/report/fragment/",
        views.evaluation_report_fragment,
        name="report-fragment",
    ),
    path("compare/", views.compare, name="compare"),
    path("api/v1/runs/<int:run_id>/report/", RunReportApi.as_view(), name="api-run-report"),
    path("evaluation/runs/<int:run_id>/rejudge/", rejudge_start, name="rejudge-start"),
    path("evaluation/runs/<int:run_id>/rejudge/fragment/", rejudge_fragment, name="rejudge-fragment"),
    path("api/v1/runs/<int:run_id>/rejudge/", RunRejudgeApi.as_view(), name="api-run-rejudge"),
    path("api/v1/rejudge/<int:job_id>/", RejudgeJobApi.as_view(), name="api-rejudge-job"),
    path("api/v1/runs/<int:run_id>/judge-price/", RunJudgePriceApi.as_view(), name="api-run-judge-price"),
]
