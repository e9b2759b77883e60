from django.urls import path

from webapp.audits import views

app_name = "audits"

# Everything here is under /audits/queue/: the only prefix annotators may open.
urlpatterns = [
    path("queue/", views.queue, name="queue"),
    path("queue/<int:audit_id>/", views.audit_items, name="items"),
    path("queue/items/<int:item_id>/", views.item_workspace, name="item"),
    path("queue/items/<int:item_id>/label/", views.label_post, name="label"),
]
