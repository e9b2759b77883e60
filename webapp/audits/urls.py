from django.urls import path

from webapp.audits import views

app_name = "audits"

# Annotators may open only what is under /audits/queue/ (webapp.accounts.middleware); the rest is for researchers.
urlpatterns = [
    path("", views.audit_list, name="list"),
    path("new/", views.audit_new, name="new"),
    path("<int:audit_id>/report/", views.audit_report, name="report"),
    path("reports/<int:report_id>/", views.frozen_report, name="frozen_report"),
    path("<int:audit_id>/status/", views.audit_status, name="status"),
    path("<int:audit_id>/adjudicate/", views.adjudicate, name="adjudicate"),
    path("<int:audit_id>/adjudicate/<int:step_id>/", views.adjudication_post, name="adjudication"),
    path("<int:audit_id>/export.jsonl", views.export_jsonl, name="export_jsonl"),
    path("<int:audit_id>/export/<slug:table>.csv", views.export_csv, name="export_csv"),
    path("queue/", views.queue, name="queue"),
    path("queue/<int:audit_id>/", views.audit_items, name="items"),
    path("queue/<int:audit_id>/resume/", views.resume, name="resume"),
    path("queue/items/<int:item_id>/", views.item_workspace, name="item"),
    path("queue/items/<int:item_id>/label/", views.label_post, name="label"),
]
