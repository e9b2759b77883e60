from django.urls import path

from webapp.audits import views

app_name = "audits"

# Annotators may open only what is under /audits/queue/ (webapp.accounts.middleware); the rest is for researchers.
urlpatterns = [
    path("", views.audit_list, name="list"),
    path("new/", views.audit_new, name="new"),
    path("<int:audit_id>/report/", views.audit_report, name="report"),
    path("queue/", views.queue, name="queue"),
    path("queue/<int:audit_id>/", views.audit_items, name="items"),
    path("queue/items/<int:item_id>/", views.item_workspace, name="item"),
    path("queue/items/<int:item_id>/label/", views.label_post, name="label"),
]
