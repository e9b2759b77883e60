"""Imports that run back up a layer, and templates that load or include an app above their own.

    python bench/layers.py              # the working tree
    python bench/layers.py --rev HEAD~3 # a commit (read with `git archive`, nothing checked out)

Prints the layer order, how many imports each layer makes of each lower one, and every import and template use
that runs back up, counted; the rules and the scan are ``tests/test_layers.py``'s.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_layers import (  # noqa: E402  # the repository root goes on the path first
    PACKAGES,
    WEBAPP_TIERS,
    _module_name,
    app_labels,
    imports_of,
    layer_of,
    template_reach_ups,
    violations,
)


def edges(root: Path) -> Counter[tuple[str, str]]:
    """``(importing layer, imported layer)`` -> number of imports, across layers only."""
    labels = app_labels(root)
    counted: Counter[tuple[str, str]] = Counter()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = _module_name(path, root)
            source_layer = layer_of(".".join(module))
            source = path.read_text(encoding="utf-8")
            for _, target in imports_of(source, module, path.name == "__init__.py", labels):
                target_layer = layer_of(target)
                if source_layer and target_layer and target_layer != source_layer:
                    counted[(source_layer, target_layer)] += 1
    return counted


def report(root: Path, name: str) -> None:
    print(f"layers of {name}, base first:")
    print("  packages: " + " → ".join(PACKAGES))
    print("  webapp apps: " + " → ".join(", ".join(tier) for tier in WEBAPP_TIERS) + " → project modules")
    print("imports between layers:")
    for (source, target), count in sorted(edges(root).items()):
        print(f"  {source:22} → {target:22} {count:4}")
    found = violations(root)
    print(f"imports that run back up a layer: {len(found)}")
    for line in found:
        print("  " + line)
    templates = sorted(template_reach_ups(root))
    print(f"templates that load or include an app above their own: {len(templates)}")
    for line in templates:
        print("  " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="a commit to scan instead of the working tree")
    args = parser.parse_args()
    if not args.rev:
        report(ROOT, "the working tree")
        return
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", args.rev], capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory() as folder:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        report(Path(folder), args.rev)


if __name__ == "__main__":
    main()
