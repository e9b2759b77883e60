# Two commands set up a fresh machine that has only python3: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SHARED ?= ../shared

.PHONY: demo test lint typecheck pytest browser bench verify-reference clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

# The demo: migrate a SQLite database under var/, load demo/ (users, two runs to compare, an audit), set up the
# CPU model, then serve the web app and a Celery worker (filesystem broker) until Ctrl-C.
demo: $(VENV)/.installed
	$(PY) -m agent.setup_model
	$(PY) manage.py demo

test: lint typecheck pytest

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

# Debian's Chromium for the browser test (apt, once); never a browser download of Playwright's own.
browser: $(VENV)/.installed
	VENV=$(VENV) sh tests/browser_setup.sh

pytest: $(VENV)/.installed browser
	$(PY) -m pytest

verify-reference: $(VENV)/.installed
	$(PY) -m scoring.verify_reference $(SHARED)/reference

bench: $(VENV)/.installed
	$(PY) -m scoring.bench
	$(PY) bench/api.py

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
