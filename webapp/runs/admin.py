from django.contrib import admin

from webapp.runs.models import MetricPoint, Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "kind", "method", "algorithm", "status", "created_by", "created_at")
    list_filter = ("kind", "method", "status")
    search_fields = ("name", "model_name")
    list_select_related = ("created_by",)
    raw_id_fields = ("base_run",)


@admin.register(MetricPoint)
class MetricPointAdmin(admin.ModelAdmin):
    list_display = ("run", "step", "key", "value", "wall_time")
    list_filter = ("key",)
    raw_id_fields = ("run",)
    list_select_related = ("run",)
