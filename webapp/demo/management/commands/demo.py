from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from webapp.demo.services import DEMO_USERS, demo_prepare_training, demo_seed


class Command(BaseCommand):
    help = (
        "Migrate, load the demo data (users, corpus, questions, two runs, an audit), build the demo index and the "
        "warm-started SmolLM2 once, then serve the web app with a Celery worker on every queue until Ctrl-C. "
        "--seed-only loads the data and exits."
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
        demo_prepare_training(say=self.stdout.write)
        # Real worker processes (the filesystem broker unless CELERY_BROKER_URL is set), stopped with the server:
        # one for training, so a run never holds up an index build or an evaluation, and one for everything else
        # with Celery beat inside it, whose periodic checks notice a dead trainer or index build with no page open.
        celery = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "--pool=solo", "--loglevel=INFO"]
        schedule = Path(settings.CELERY_FS_DIR) / "beat-schedule"
        schedule.parent.mkdir(parents=True, exist_ok=True)
        workers = [
            subprocess.Popen([*celery, "-Q", "train", "-n", "train@%h"], cwd=settings.BASE_DIR),
            subprocess.Popen(
                [
                    *celery,
                    "-Q",
                    "default,judge,retrieval",
                    "-n",
                    "main@%h",
                    "-B",
                    "--schedule",
                    str(schedule),
                ],
                cwd=settings.BASE_DIR,
            ),
        ]
        # A plain `kill` ends the server through the finally below, so the worker never outlives it.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(timeout=30)
