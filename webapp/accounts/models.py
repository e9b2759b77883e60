"""People: a profile holding each user's role."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"
    RESEARCHER = "researcher", "Researcher"
    ANNOTATOR = "annotator", "Annotator"


class Profile(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANNOTATOR)

    class Meta:
        constraints = (
            models.CheckConstraint(condition=models.Q(role__in=Role.values), name="profile_role_valid"),
        )

    def __str__(self) -> str:
        return f"{self.user} ({self.role})"
