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
