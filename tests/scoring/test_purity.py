"""scoring/ stays standard-library only: importing every module of it pulls in no framework."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO_ROOT

FORBIDDEN = (
    "django",
    "torch",
    "faiss",
    "numpy",
    "transformers",
    "trl",
    "rest_framework",
    "celery",
    "sklearn",
)

_PROBE = """
import importlib, json, pkgutil, sys
import scoring
names = [m.name for m in pkgutil.walk_packages(scoring.__path__, "scoring.")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"modules": names, "loaded": sorted(sys.modules)}))
"""


def test_it_imports_every_scoring_module_without_any_framework() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=120
    ).stdout
    report = json.loads(out)
    loaded_roots = {name.split(".")[0] for name in report["loaded"]}
    assert "scoring.verify_reference" in report["modules"]  # the walk really reached the package's modules
    assert loaded_roots.isdisjoint(FORBIDDEN), loaded_roots & set(FORBIDDEN)
