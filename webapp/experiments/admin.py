from django.contrib import admin

from webapp.experiments.models import Experiment, ExperimentRun


class ExperimentRunInline(admin.TabularInline):
    model = ExperimentRun
    extra = 0
    raw_id_fields = ("run",)


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "status", "created_at")
    list_filter = ("status",)
    inlines = (ExperimentRunInline,)


@admin.register(ExperimentRun)
class ExperimentRunAdmin(admin.ModelAdmin):
    list_display = ("id", "experiment", "role", "method", "position", "run")
    raw_id_fields = ("experiment", "run")
