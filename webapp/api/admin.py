from django.contrib import admin

from webapp.api.models import ScoreJob


@admin.register(ScoreJob)
class ScoreJobAdmin(admin.ModelAdmin):
    list_display = ("id", "method", "n_trajectories", "status", "created_by", "created_at", "finished_at")
    list_filter = ("method", "status")
    readonly_fields = ("error",)
