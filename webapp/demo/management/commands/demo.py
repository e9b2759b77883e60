from __future__ import annotations

import signal
import socket
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.demo.services import (
    DEMO_USERS,
    demo_mark_orphans_crashed,
    demo_prepare_index,
    demo_seed,
    demo_stop_everything,
    demo_warm_start,
    progress_lines,
)


def _check_port(addrport: str) -> None:
    host, _, port = addrport.rpartition(":")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]") or "127.0.0.1", int(port)))
        except OSError as exc:
            raise CommandError(
                f"cannot serve on {addrport}: {exc.strerror} (give another address: ADDR:PORT)"
            ) from None


class _Stop(Exception):
    """SIGTERM: leave the server loop and stop everything the demo started."""


class Command(BaseCommand):
    help = (
        "Migrate, load the demo data (users, corpus, questions, two runs, an audit) and build the demo index, then "
        "serve the web app with Celery workers (and beat) until Ctrl-C or SIGTERM, while the warm-started SmolLM2 "
        "is made in the background as a warm-start run (once). Stopping ends the server, the workers, beat, every "
        "trainer and the warm start; their runs are marked with the reason. --seed-only loads the data and exits."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--seed-only", action="store_true")

    def handle(self, *args: Any, addrport: str, seed_only: bool, **options: Any) -> None:
        call_command("migrate", verbosity=0)
        seed = demo_seed()
        self.stdout.write("demo data " + ("loaded" if seed.created else "already there"))
        self.stdout.write(f"searchlab: http://{addrport}/accounts/login/")
        self.stdout.write("log in as " + ", ".join(f"{u} / {u}-demo ({r})" for u, r in DEMO_USERS))
        self.stdout.write(
            f"API token of rey: {seed.token}  (curl -H 'Authorization: Token {seed.token}' "
            f"http://{addrport}/api/v1/runs/)"
        )
        if seed_only:
            return
        _check_port(
            addrport
        )  # runserver os._exit()s on a taken port: this command could not stop its workers
        demo_prepare_index(say=self.stdout.write)
        demo_mark_orphans_crashed()
        warm = demo_warm_start(say=self.stdout.write)
        if warm is not None:
            self.stdout.write(f"  its page: http://{addrport}/runs/{warm.pk}/")
        # Real worker processes (the filesystem broker unless CELERY_BROKER_URL is set), each in a process group of
        # its own, stopped by this command: one for training, so a run never holds up an index build or an
        # evaluation, and one for everything else with Celery beat inside it, whose periodic checks notice a dead
        # trainer or index build with no page open.
        celery = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "--pool=solo", "--loglevel=INFO"]
        schedule = Path(settings.CELERY_FS_DIR) / "beat-schedule"
        schedule.parent.mkdir(parents=True, exist_ok=True)
        queues = (
            ["-Q", "train", "-n", "train@%h"],
            ["-Q", "default,judge,retrieval", "-n", "main@%h", "-B", "--schedule", str(schedule)],
        )
        workers: list[subprocess.Popen[bytes]] = []
        stopped_by = "Ctrl-C"

        def on_term(*_: object) -> None:
            raise _Stop

        signal.signal(signal.SIGTERM, on_term)
        try:
            for queue in queues:
                # start_new_session: a Ctrl-C reaches this command only, which stops the trainers first and then
                # the workers (a worker that heard it too would wait for its supervisor task, or die mid-write).
                workers.append(
                    subprocess.Popen([*celery, *queue], cwd=settings.BASE_DIR, start_new_session=True)
                )
            # The warm start's step, phase and ETA on the terminal too, each minute, among the server's lines.
            watch = (
                progress_lines(Path(warm.config["output_dir"]), self.stdout.write) if warm else nullcontext()
            )
            with watch:
                # DEBUG off (required beyond loopback, webapp.common.exposure): runserver still serves the CSS
                call_command("runserver", addrport, use_reloader=False, insecure_serving=not settings.DEBUG)
        except _Stop:
            stopped_by = "SIGTERM"
        except KeyboardInterrupt:
            pass
        finally:
            # A second Ctrl-C or SIGTERM must not cut the clean-up short and leave a trainer behind.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            self.stdout.write(f"stopping ({stopped_by}): the trainers and the warm start, then the workers…")
            ended = demo_stop_everything(
                reason=f"stopped: `make demo` ended ({stopped_by}) while it ran", workers=workers
            )
            self.stdout.write(
                f"stopped; {len(ended)} active run(s) marked with the reason" if ended else "stopped"
            )
