from __future__ import annotations

from django.db.models import QuerySet

from webapp.imports.models import ImportJob


def import_job_list(*, limit: int = 50) -> QuerySet[ImportJob]:
    return ImportJob.objects.select_related("created_by")[:limit]
