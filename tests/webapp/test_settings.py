"""Settings read every environment variable once, strictly: a bad value stops start-up with a clear message."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from webapp import settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("YES", True), ("on", True), ("0", False), ("false", False), ("", False)],
)
def test_it_reads_booleans(monkeypatch, raw, expected):
    monkeypatch.setenv("SOME_FLAG", raw)
    assert settings.env_bool("SOME_FLAG", not expected) is expected


@pytest.mark.parametrize(
    ("helper", "raw", "message"),
    [
        (lambda: settings.env_bool("X_VAR", False), "maybe", "X_VAR='maybe' is not a boolean"),
        (lambda: settings.env_int("X_VAR", 1), "ten", "X_VAR='ten' is not an integer"),
        (lambda: settings.env_int("X_VAR", 1, minimum=1), "0", "X_VAR=0 is below the minimum 1"),
        (lambda: settings.env_choice("X_VAR", "a", ("a", "b")), "c", "X_VAR='c' is not one of: a, b"),
        (lambda: settings.env_url("X_VAR", "", ("redis",)), "http://x", "must be a URL with scheme redis"),
    ],
)
def test_it_rejects_bad_values_naming_the_variable(monkeypatch, helper, raw, message):
    monkeypatch.setenv("X_VAR", raw)
    with pytest.raises(ImproperlyConfigured, match=message.replace("(", r"\(")):
        helper()


def _start(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "SEARCHLAB_ENV")} | env
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_it_refuses_production_without_a_secret_key():
    result = _start(SEARCHLAB_ENV="production", DJANGO_SETTINGS_MODULE="webapp.settings")
    assert result.returncode != 0
    assert "SECRET_KEY must be set when SEARCHLAB_ENV=production" in result.stderr


def test_it_starts_production_with_a_secret_key():
    result = _start(SEARCHLAB_ENV="production", SECRET_KEY="s" * 50, DJANGO_SETTINGS_MODULE="webapp.settings")
    assert result.returncode == 0, result.stderr


def test_it_stops_on_a_bad_database_url():
    result = _start(DATABASE_URL="mysqlx://nowhere/db", DJANGO_SETTINGS_MODULE="webapp.settings")
    assert result.returncode != 0
    assert "DATABASE_URL='mysqlx://nowhere/db' must be a URL with scheme" in result.stderr


def test_it_documents_every_variable_in_the_env_example():
    source = (ROOT / "webapp" / "settings.py").read_text()
    read = set(re.findall(r'env_(?:str|bool|int|list|choice|path|url)\(\s*"([A-Z_]+)"', source))
    example = (ROOT / "docker" / ".env.example").read_text()
    documented = set(re.findall(r"^([A-Z_]+)=", example, flags=re.MULTILINE))
    assert read, "no variables found: the pattern no longer matches settings.py"
    assert read <= documented, f"missing from docker/.env.example: {sorted(read - documented)}"
