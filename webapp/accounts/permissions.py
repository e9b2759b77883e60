from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from webapp.accounts.selectors import user_is_researcher


class IsResearcher(BasePermission):
    """The API is for admins and researchers; annotators get 403."""

    message = "The API is open to researchers and admins only."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and user_is_researcher(user=request.user))
