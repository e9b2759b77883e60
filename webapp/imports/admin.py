from django.contrib import admin

from webapp.imports.models import ImportJob


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "kind",
        "name",
        "original_filename",
        "status",
        "record_count",
        "seconds",
        "created_at",
    )
    list_filter = ("kind", "status")
    readonly_fields = ("error",)
