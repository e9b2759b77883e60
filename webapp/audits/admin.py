from django.contrib import admin

from webapp.audits.models import Adjudication, Audit, AuditItem, FrozenReport, Label


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


@admin.register(Adjudication)
class AdjudicationAdmin(admin.ModelAdmin):
    list_display = ("audit", "step", "label", "adjudicator", "updated_at")
    raw_id_fields = ("step",)


@admin.register(FrozenReport)
class FrozenReportAdmin(admin.ModelAdmin):
    """Read-only: a frozen report is what a paper cites."""

    list_display = ("pk", "audit", "n_labels", "n_adjudications", "closed_by", "created_at")

    def has_change_permission(self, request, obj=None) -> bool:
        return False
