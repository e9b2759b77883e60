"""The demo's warm model for the browser test, built in the background while the rest of the suite runs.

On a machine without it in ``SEARCHLAB_MODEL_CACHE`` (a fresh CI machine), the warm start is about 20 minutes of
two cores, and the browser test that needs it is one of the last. Built inside that test, it adds its whole time to
the suite's; started when collection ends, it overlaps the hundreds of single-threaded web and scoring tests
before it (a suite process uses about one core, the warm start the other). Only when that test is collected and
the cache lacks the current recipe; the test waits for the build, then makes the model in-process as before if
the build failed (so a failure shows in the test, with this build's log named). A build still running when the
session ends is stopped: nothing outlives ``pytest``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("SEARCHLAB_MODEL_CACHE") or Path.home() / ".cache" / "searchlab")
LOG = CACHE / "warm-start-background.log"
BUILD = (
    "import sys; from pathlib import Path; from trainer.warm_start import ensure_demo_warm_model; "
    "ensure_demo_warm_model(Path(sys.argv[1]), Path(sys.argv[2]))"
)

_build: subprocess.Popen[bytes] | None = None


def needed() -> bool:
    from trainer.warm_start import DEMO_RECIPE, WARM_MODEL_NAME, demo_warm_model_recipe

    return demo_warm_model_recipe(CACHE / "models" / WARM_MODEL_NAME) != DEMO_RECIPE


def start(shared: Path) -> None:
    """Convert SmolLM2 into the cache now (a minute; other tests read it), then warm-start it in a subprocess."""
    global _build
    from agent import setup_model

    setup_model.setup_model(CACHE)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("wb") as log:
        _build = subprocess.Popen(
            [sys.executable, "-c", BUILD, str(CACHE), str(shared)],
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            start_new_session=True,
        )


def wait() -> None:
    """Until the background build (if any) has ended; how it ended shows when the test makes the model itself."""
    global _build
    if _build is None:
        return
    started = time.monotonic()
    code = _build.wait()
    print(
        f"background warm start ended with {code} after waiting {time.monotonic() - started:.0f} s; log: {LOG}"
    )
    _build = None


def stop() -> None:
    global _build
    if _build is None or _build.poll() is not None:
        return
    _build.terminate()
    try:
        _build.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _build.kill()
        _build.wait()
    _build = None
