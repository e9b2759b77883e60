from django.contrib import admin

from webapp.audits.models import Audit, AuditItem, Label


@admin.register(Audit)
class AuditAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "sample_size",
        "seed",
        "stratification",
        "annotators_per_item",
        "blind",
        "status",
        "created_at",
    )
    list_filter = ("status", "blind", "stratification")
    filter_horizontal = ("source_runs", "annotators")


@admin.register(AuditItem)
class AuditItemAdmin(admin.ModelAdmin):
    list_display = ("audit", "position", "trajectory")
    raw_id_fields = ("trajectory",)
    filter_horizontal = ("assignees",)
    list_select_related = ("audit",)


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ("item", "step", "annotator", "label", "seconds_spent", "updated_at")
    list_filter = ("label",)
    raw_id_fields = ("item", "step")
