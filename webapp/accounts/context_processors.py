from __future__ import annotations

from django.http import HttpRequest

from webapp.accounts.selectors import user_role


def role(request: HttpRequest) -> dict[str, str | None]:
    current = user_role(user=request.user)
    return {"role": current.value if current else None}
