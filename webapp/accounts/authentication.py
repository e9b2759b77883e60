from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token authentication, loading the user's profile in the same query (the role check needs it)."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        try:
            token = self.get_model().objects.select_related("user", "user__profile").get(key=key)
        except self.get_model().DoesNotExist:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return token.user, token
