"""What the management commands share."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import CommandError


def user_by_name_option(username: str, option: str = "--user") -> AbstractBaseUser | None:
    """A command's ``--user NAME`` (the creator it records): None when not given, CommandError when unknown."""
    if not username:
        return None
    user: AbstractBaseUser | None = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"{option}: no user named {username!r}")
    return user
