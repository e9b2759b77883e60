"""Reads about people."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from webapp.accounts.models import Profile, Role


def user_role(*, user: AbstractBaseUser | AnonymousUser) -> Role | None:
    """The user's role; superusers are admins. A user without a profile gets the least privilege (annotator)."""
    if not user.is_authenticated:
        return None
    if getattr(user, "is_superuser", False):
        return Role.ADMIN
    try:
        return Role(user.profile.role)  # type: ignore[union-attr]
    except Profile.DoesNotExist:
        return Role.ANNOTATOR


def user_is_researcher(*, user: AbstractBaseUser | AnonymousUser) -> bool:
    """Admins and researchers see everything; annotators see only their audit queues."""
    return user_role(user=user) in (Role.ADMIN, Role.RESEARCHER)
