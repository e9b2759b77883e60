"""Cross-cutting fixtures only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """The read-only shared/ folder beside the repository (papers, reference vectors, the wiki_multihop data)."""
    return Path(os.environ.get("SEARCHLAB_SHARED_DIR", REPO_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    path = shared_dir() / "reference"
    if not path.is_dir():
        pytest.fail(f"reference vectors not found at {path}; set SEARCHLAB_SHARED_DIR")
    return path


def smollm2_path() -> Path:
    """The converted SmolLM2: the machine's model cache (SEARCHLAB_MODEL_CACHE), var/models, or made now."""
    cache = Path(os.environ.get("SEARCHLAB_MODEL_CACHE", Path.home() / ".cache" / "searchlab"))
    for folder in (
        cache / "models" / "SmolLM2-135M-Instruct",
        REPO_ROOT / "var" / "models" / "SmolLM2-135M-Instruct",
    ):
        if (folder / "config.json").is_file():
            return folder
    from agent import setup_model

    return setup_model.setup_model(REPO_ROOT / "var")


BROWSER_WARM_TEST = "tests/webapp/training/test_browser_warm_start.py"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the demo's warm start in the background when the browser test that needs it will run (and the model
    cache lacks it): tests/demo_warm_model.py says why."""
    if session.config.option.collectonly:
        return
    if not any(item.nodeid.startswith(BROWSER_WARM_TEST) for item in session.items):
        return
    from tests import demo_warm_model
    from tests.webapp.training.test_browser import CHROMIUM

    if Path(CHROMIUM).exists() and demo_warm_model.needed():  # else the test is skipped, or needs no build
        demo_warm_model.start(shared_dir())


# trylast: after pytest-django's ordering (database tests first), which would put it at about a quarter of the suite
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser test that waits for the background warm start runs last, so that every other test overlaps the
    build instead of queueing behind it (on an empty model cache the build is about 20 minutes of one core)."""
    waiting = [item for item in items if item.nodeid.startswith(BROWSER_WARM_TEST)]
    if waiting:
        items[:] = [item for item in items if not item.nodeid.startswith(BROWSER_WARM_TEST)] + waiting


def pytest_sessionfinish(session: pytest.Session) -> None:
    from tests import demo_warm_model

    demo_warm_model.stop()
