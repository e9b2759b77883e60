"""Writes about people."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from django.db import transaction
from rest_framework.authtoken.models import Token

from webapp.accounts.models import Profile, Role


@transaction.atomic
def user_create(*, username: str, password: str | None, role: Role, email: str = "") -> AbstractUser:
    user_model = get_user_model()
    user = user_model.objects.create_user(username=username, email=email, password=password)
    if role is Role.ADMIN:
        user.is_staff = True
        user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
    Profile.objects.create(user=user, role=role)
    return user


@transaction.atomic
def user_set_role(*, user: AbstractUser, role: Role) -> Profile:
    profile, _ = Profile.objects.update_or_create(user=user, defaults={"role": role})
    return profile


def token_get_or_create(*, user: AbstractUser) -> str:
    token, _ = Token.objects.get_or_create(user=user)
    return token.key
