from django.contrib import admin

from webapp.training.models import TrainingProcess


@admin.register(TrainingProcess)
class TrainingProcessAdmin(admin.ModelAdmin):
    list_display = ("run", "hostname", "pid", "exit_code", "stop_requested_at", "killed")
    readonly_fields = ("metrics_offset", "samples_offset")
