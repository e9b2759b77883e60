from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from webapp.accounts.models import Role
from webapp.accounts.services import token_get_or_create, user_create


class Command(BaseCommand):
    help = "Create a user with a role (admin, researcher, annotator) and print their API token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=Role.values, default=Role.RESEARCHER)
        parser.add_argument("--password", default=None)
        parser.add_argument("--email", default="")

    def handle(
        self, *args: Any, username: str, role: str, password: str | None, email: str, **options: Any
    ) -> None:
        user = user_create(username=username, password=password, role=Role(role), email=email)
        self.stdout.write(f"created {user.username} ({role}); API token: {token_get_or_create(user=user)}")
