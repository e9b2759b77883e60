"""Login required everywhere, and annotators confined to their audit queues."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from webapp.accounts.models import Role
from webapp.accounts.selectors import user_role

API_PREFIX = "/api/"
# What an annotator may reach: their queues, logging out, and static files.
ANNOTATOR_PREFIXES = ("/audits/queue/", "/accounts/", "/static/")
ANNOTATOR_HOME = "/audits/queue/"


class LoginRequiredExceptApiMiddleware(LoginRequiredMiddleware):
    """Django's LoginRequiredMiddleware for HTML pages.

    The API authenticates each request itself (token or session), and answers 401/403 rather than a redirect to the
    login page, with DRF's default permission class requiring an authenticated researcher.
    """

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], view_args: Any, view_kwargs: Any
    ) -> HttpResponse | None:
        if request.path.startswith(API_PREFIX):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


class AnnotatorScopeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            not request.path.startswith(API_PREFIX)
            and user_role(user=request.user) is Role.ANNOTATOR
            and not request.path.startswith(ANNOTATOR_PREFIXES)
        ):
            if request.path == "/":  # where the login page sends everyone: an annotator's home is the queue
                return HttpResponseRedirect(ANNOTATOR_HOME)
            raise PermissionDenied("Annotators can only open their audit queues.")
        return self.get_response(request)
