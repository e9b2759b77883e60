"""No import runs back up a layer: between the packages, and between the web app's apps.

Packages, base first (each imports only those before it): ``scoring`` → ``retrieval`` → ``agent`` → ``trainer``
→ ``webapp``. Inside ``webapp`` the apps stand on tiers, base first (:data:`WEBAPP_TIERS`); an app imports only
apps of lower tiers, never one of its own tier or above. The project modules (``webapp/settings.py``, ``urls.py``,
``celery.py``, ``wsgi.py``) stand above every app. An app's template tags, management commands and migrations are
the app's own.

Templates are read too: a template under ``templates/<app>/`` that loads another app's tag library
(``{% load training_reporting %}``) or includes or extends another app's template stands in that app's tier the same
way. A link (``{% url 'training:new' %}``) names a page, not code, and is not counted.

Read from the source with :mod:`ast` alone (no Django, nothing imported): every ``import`` and ``from`` at any
depth (inside functions and ``TYPE_CHECKING`` blocks too), ``importlib.import_module("...")`` with a literal name,
and model references by label (``ForeignKey("runs.Run")``, ``apps.get_model("runs", "Run")``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PACKAGES = ("scoring", "retrieval", "agent", "trainer", "webapp")

WEBAPP_TIERS: tuple[tuple[str, ...], ...] = (
    ("common",),  # shared forms, options and renderers; no models
    ("accounts", "corpora", "datasets"),  # users, corpora and their indexes, question datasets
    ("runs",),  # a run, its metric points; the runs list and the run page
    ("trajectories",),  # a run's trajectories, steps and verdicts
    ("audits", "training"),  # human audits of verdicts; training runs (supervisor, ingest, forms)
    ("evaluation",),  # evaluation runs, reports (with audit-corrected rates), compare, re-judge
    ("experiments",),  # experiments made of training and evaluation runs
    ("api", "demo", "imports"),  # the REST API's root, the demo, the imports page
)
PROJECT = "project"  # webapp/__init__.py, settings.py, urls.py, celery.py, wsgi.py
MODEL_FIELDS = {"ForeignKey", "OneToOneField", "ManyToManyField"}


def _rank(layer: str) -> int:
    """A layer's height: packages 0-3, the web app's tiers from 10, its project modules on top."""
    if not layer.startswith("webapp"):
        return PACKAGES.index(layer)
    if layer == f"webapp.{PROJECT}":
        return 10 + len(WEBAPP_TIERS)
    app = layer.split(".", 1)[1]
    return 10 + next(i for i, tier in enumerate(WEBAPP_TIERS) if app in tier)


def layer_of(module: str) -> str | None:
    """``scoring``, ..., ``trainer``, ``webapp.<app>`` or ``webapp.project`` for a dotted module; ``None`` when it
    is outside the layered code (the standard library, third parties, ``bench``, ``tests``)."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    if parts[0] != "webapp":
        return parts[0]
    if len(parts) > 1 and any(parts[1] in tier for tier in WEBAPP_TIERS):
        return f"webapp.{parts[1]}"
    return f"webapp.{PROJECT}"


def app_labels(root: Path = ROOT) -> dict[str, str]:
    """Django app label -> app folder (``qa_datasets`` -> ``datasets``), read from each ``apps.py``."""
    labels = {}
    for apps_py in sorted((root / "webapp").glob("*/apps.py")):
        labels[apps_py.parent.name] = apps_py.parent.name
        for node in ast.walk(ast.parse(apps_py.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Assign) or [getattr(t, "id", "") for t in node.targets] != ["label"]:
                continue
            if label := _literal(node.value):
                labels[label] = apps_py.parent.name
    return labels


def _module_name(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def imports_of(
    source: str, module: list[str], is_package: bool, labels: dict[str, str]
) -> Iterator[tuple[int, str]]:
    """``(line, dotted module)`` for everything ``source`` (the module named ``module``) imports or references."""
    package = module if is_package else module[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            target = ".".join(part for part in (base, node.module or "") if part)
            # `from webapp import training` and `from . import selectors` name modules in their aliases
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            to = next((k.value for k in node.keywords if k.arg == "to"), None)
            first = _literal(node.args[0] if node.args else to)
            if first is None:
                continue
            if name == "import_module":
                yield node.lineno, first
            elif name in MODEL_FIELDS and "." in first and first.split(".")[0] in labels:
                yield node.lineno, f"webapp.{labels[first.split('.')[0]]}.models"
            elif name == "get_model" and len(node.args) == 2 and first in labels:
                yield node.lineno, f"webapp.{labels[first]}.models"


def violations(root: Path = ROOT) -> list[str]:
    """``file:line: <layer> imports <module> of <layer above or beside it>`` for every import that runs back up."""
    labels = app_labels(root)
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = _module_name(path, root)
            source_layer = layer_of(".".join(module))
            assert source_layer is not None
            source = path.read_text(encoding="utf-8")
            for line, target in imports_of(source, module, path.name == "__init__.py", labels):
                target_layer = layer_of(target)
                if target_layer is None or target_layer == source_layer:
                    continue
                if _rank(target_layer) >= _rank(source_layer):
                    where = "above" if _rank(target_layer) > _rank(source_layer) else "beside"
                    found.append(
                        f"{path.relative_to(root)}:{line}: {source_layer} imports {target} "
                        f"({target_layer}, a layer {where} it)"
                    )
    return found


TEMPLATE_USES = re.compile(r"{%\s*(load|include|extends)\s+(.+?)\s*%}")


def template_reach_ups(root: Path = ROOT) -> set[str]:
    """``<template>: load <library> (<layer>)`` or ``: include <template> (<layer>)`` for each use of an app in
    the same tier or above, in the templates under ``templates/<app>/``."""
    libraries = {
        path.stem: f"webapp.{path.parts[-3]}" for path in (root / "webapp").glob("*/templatetags/*.py")
    }
    apps = {app for tier in WEBAPP_TIERS for app in tier}
    found = set()
    for path in sorted((root / "templates").glob("*/**/*.html")):
        app = path.relative_to(root / "templates").parts[0]
        if app not in apps:
            continue
        for match in TEMPLATE_USES.finditer(path.read_text(encoding="utf-8")):
            if match.group(1) == "load":
                used = [(name, libraries.get(name)) for name in match.group(2).split() if name != "from"]
            else:
                name = match.group(2).strip("\"'")
                used = [(name, f"webapp.{name.split('/')[0]}" if name.split("/")[0] in apps else None)]
            for name, layer in used:
                if layer and layer != f"webapp.{app}" and _rank(layer) >= _rank(f"webapp.{app}"):
                    found.add(f"{path.relative_to(root)}: {match.group(1)} {name} ({layer})")
    return found


def test_no_template_reaches_up() -> None:
    found = sorted(template_reach_ups())
    assert not found, f"{len(found)} templates reach up a layer:\n" + "\n".join(found)


def test_no_import_runs_back_up() -> None:
    found = violations()
    assert not found, f"{len(found)} imports run back up a layer:\n" + "\n".join(found)


def test_every_app_stands_on_a_tier() -> None:
    apps = {path.parent.name for path in (ROOT / "webapp").glob("*/__init__.py")}
    tiered = [app for tier in WEBAPP_TIERS for app in tier]
    assert len(tiered) == len(set(tiered)), f"an app stands on two tiers: {tiered}"
    assert apps == set(tiered), (
        f"apps without a tier: {sorted(apps - set(tiered))}; tiers without an app: "
        + str(sorted(set(tiered) - apps))
    )


def _scan(source: str, module: str, is_package: bool = False) -> list[tuple[int, str | None]]:
    found = imports_of(source, module.split("."), is_package, app_labels())
    return [(line, layer_of(target)) for line, target in found]


def test_the_scan_sees_every_kind_of_import() -> None:
    source = "\n".join(
        [
            "import os",
            "from webapp import training",
            "from ..evaluation.models import EvaluationReport",
            "def f():",
            "    import webapp.trajectories.selectors as s",
            "    from .selectors import run_get",
            "    importlib.import_module('webapp.experiments.specs')",
            "class M:",
            "    x = models.ForeignKey('qa_datasets.Question', on_delete=None)",
            "    y = apps.get_model('audits', 'Audit')",
            "    z = models.OneToOneField(to='runs.Run', on_delete=None)",
            "    w = models.ForeignKey('auth.User', on_delete=None)",
        ]
    )
    assert _scan(source, "webapp.runs.views") == [
        (1, None),
        (2, "webapp.training"),
        (3, "webapp.evaluation"),
        (5, "webapp.trajectories"),
        (6, "webapp.runs"),
        (7, "webapp.experiments"),
        (9, "webapp.datasets"),
        (10, "webapp.audits"),
        (11, "webapp.runs"),
    ]
    assert _scan("from . import selectors", "webapp.runs", is_package=True) == [(1, "webapp.runs")]
    assert _scan("from webapp.settings import X", "webapp.urls") == [(1, "webapp.project")]


def test_ranks_order_packages_below_apps_below_the_project() -> None:
    ranks = [_rank(layer) for layer in ("scoring", "trainer", "webapp.common", "webapp.runs", "webapp.demo")]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
    assert _rank("webapp.audits") == _rank("webapp.training") < _rank("webapp.evaluation")
    assert _rank(f"webapp.{PROJECT}") > max(_rank(f"webapp.{app}") for tier in WEBAPP_TIERS for app in tier)


def test_the_template_scan_sees_loads_and_includes(tmp_path: Path) -> None:
    (tmp_path / "webapp" / "training" / "templatetags").mkdir(parents=True)
    (tmp_path / "webapp" / "training" / "templatetags" / "training_progress.py").write_text("")
    (tmp_path / "templates" / "runs").mkdir(parents=True)
    (tmp_path / "templates" / "runs" / "page.html").write_text(
        '{% extends "base.html" %}{% load static training_progress %}{% include "runs/_part.html" %}\n'
        "{% include 'evaluation/_slot.html' %}<a href=\"{% url 'training:new' %}\">new</a>"
    )
    assert template_reach_ups(tmp_path) == {
        "templates/runs/page.html: load training_progress (webapp.training)",
        "templates/runs/page.html: include evaluation/_slot.html (webapp.evaluation)",
    }
