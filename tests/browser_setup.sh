#!/bin/sh
# What the browser test (tests/webapp/training/test_browser.py) needs on a fresh Debian machine: Debian's Chromium
# and the Python playwright package pinned in requirements-dev.txt. Idempotent: skips what is present. Playwright's
# own browser download (`playwright install`) is never used: the test drives /usr/bin/chromium.
set -eu
VENV="${VENV:-.venv}"
if [ ! -x /usr/bin/chromium ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium
fi
if ! "$VENV/bin/python" -c "import playwright" 2>/dev/null; then
    "$VENV/bin/python" -m pip install --quiet "$(grep -E '^playwright==' requirements-dev.txt)"
fi
/usr/bin/chromium --version
"$VENV/bin/python" -c "import importlib.metadata as m; print('playwright', m.version('playwright'))"
