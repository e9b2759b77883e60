"""A Stop pressed in searchlab reaches a followed veRL run: the follower forwards it to veRL's driver as SIGINT."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from trainer import verl_follower


class _Follower:
    def read(self) -> dict[str, Any]:
        return {"metrics": [], "samples": []}


class _Client:
    """The ingest answers' ``stop`` from the second flush on, as a researcher's Stop would arrive."""

    def __init__(self) -> None:
        self.flushes = 0
        self.stop_requested = False
        self.batches: list[dict[str, Any]] = []

    def submit(self, batch: dict[str, Any]) -> None:
        self.batches.append(batch)

    def flush(self) -> bool:
        self.flushes += 1
        if self.flushes >= 2:
            self.stop_requested = True
        return True


def test_a_stop_is_forwarded_to_the_driver_once_and_the_run_is_followed_to_its_end() -> None:
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('stopped')",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    client = _Client()
    rounds = {"n": 0}

    def until() -> bool:
        rounds["n"] += 1
        return driver.poll() is not None

    verl_follower.follow(
        _Follower(),  # type: ignore[arg-type]
        client,  # type: ignore[arg-type]
        interval=0.05,
        until=until,
        final="finished",
        drain_seconds=1,
        stop_pid=driver.pid,
    )
    out, _ = driver.communicate(timeout=10)
    assert out.strip() == "stopped"  # SIGINT, the cooperative stop, not a kill
    assert client.batches[-1]["final"] == "finished"


def test_without_a_driver_pid_the_stop_is_logged_not_lost(caplog: Any) -> None:
    assert verl_follower.forward_stop(None) is False
    assert "--stop-pid" in caplog.text
