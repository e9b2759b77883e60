from django.contrib import admin

from webapp.training.models import IngestedSample, TrainingProcess


@admin.register(TrainingProcess)
class TrainingProcessAdmin(admin.ModelAdmin):
    list_display = ("run", "hostname", "pid", "exit_code", "stop_requested_at", "killed")
    readonly_fields = ("metrics_offset", "samples_offset")


@admin.register(IngestedSample)
class IngestedSampleAdmin(admin.ModelAdmin):
    """Read-only: the keys of samples a trainer reported, kept so a replayed batch is stored once."""

    list_display = ("run", "key", "created_at")
    list_filter = ("run",)
    readonly_fields = ("run", "key", "created_at")
