from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from webapp.imports.services_demo import DEMO_USERS, demo_seed


class Command(BaseCommand):
    help = (
        "Migrate, load the demo data (users, corpus, questions, two runs, an audit), then serve the web app with a "
        "Celery worker on every queue until Ctrl-C. --seed-only loads the data and exits."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--seed-only", action="store_true")

    def handle(self, *args: Any, addrport: str, seed_only: bool, **options: Any) -> None:
        call_command("migrate", verbosity=0)
        seed = demo_seed()
        self.stdout.write("demo data " + ("loaded" if seed.created else "already there"))
        self.stdout.write("log in as " + ", ".join(f"{u} / {u}-demo ({r})" for u, r in DEMO_USERS))
        self.stdout.write(
            f"API token of rey: {seed.token}  (curl -H 'Authorization: Token {seed.token}' "
            f"http://{addrport}/api/v1/runs/)"
        )
        if seed_only:
            return
        # A real worker process (the filesystem broker unless CELERY_BROKER_URL is set), stopped with the server.
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "webapp",
                "worker",
                "-Q",
                "default,judge,retrieval,train",
                "--pool=solo",
                "--loglevel=INFO",
            ],
            cwd=settings.BASE_DIR,
        )
        # A plain `kill` ends the server through the finally below, so the worker never outlives it.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
