"""The browser test's background warm start (tests/demo_warm_model.py): started, waited for, and never left running."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests import demo_warm_model


def _fake_build(monkeypatch: Any, tmp_path: Path, code: str) -> None:
    from agent import setup_model

    monkeypatch.setattr(setup_model, "setup_model", lambda var_dir: var_dir)  # no SmolLM2 conversion here
    # The session's real build (started when collection ended) keeps its handle: a fake one in its place would leave
    # the browser test nothing to wait for, and it would warm-start a second time beside the orphaned build.
    monkeypatch.setattr(demo_warm_model, "_build", None)
    monkeypatch.setattr(demo_warm_model, "CACHE", tmp_path)
    monkeypatch.setattr(demo_warm_model, "LOG", tmp_path / "build.log")
    monkeypatch.setattr(demo_warm_model, "BUILD", code)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_build_still_running_when_the_session_ends_is_stopped(monkeypatch: Any, tmp_path: Path) -> None:
    _fake_build(monkeypatch, tmp_path, "import time; print('building', flush=True); time.sleep(120)")
    demo_warm_model.start(tmp_path)
    build = demo_warm_model._build
    assert build is not None and build.poll() is None
    demo_warm_model.stop()
    build.wait(timeout=5)
    assert not _alive(build.pid)
    assert demo_warm_model._build is None


def test_the_test_waits_for_the_build_and_its_output_is_logged(monkeypatch: Any, tmp_path: Path) -> None:
    _fake_build(monkeypatch, tmp_path, "import sys; print('args', sys.argv[1:])")
    demo_warm_model.start(tmp_path / "shared")
    demo_warm_model.wait()
    assert demo_warm_model._build is None
    assert f"args ['{tmp_path}', '{tmp_path / 'shared'}']" in (tmp_path / "build.log").read_text()
    demo_warm_model.wait()  # nothing running: returns at once


def test_a_fake_build_leaves_the_sessions_real_build_to_be_waited_for(
    monkeypatch: Any, tmp_path: Path
) -> None:
    real = object()
    monkeypatch.setattr(demo_warm_model, "_build", real)
    with monkeypatch.context() as inner:
        _fake_build(inner, tmp_path, "print('fake')")
        demo_warm_model.start(tmp_path)
        demo_warm_model.wait()
    assert demo_warm_model._build is real
