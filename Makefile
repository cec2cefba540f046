# One command serves the site, one runs every test; both set themselves up first.
# Set-up is stamped on the files it installs from, so a second run installs nothing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
JS_STAMP := node_modules/.installed
# Tests and builds leave nothing behind in the repository: Python's compiled files (and
# pytest's rewritten test modules) go under .venv/, where a second run finds them. Without a
# cache each of make test's processes compiled every test module again (5 CPU-s a collection).
export PYTHONPYCACHEPREFIX := $(CURDIR)/$(VENV)/pycache
export NO_MKDOCS_2_WARNING := 1
# One intra-op thread per process by default, as the lab's command line runs: make test's two
# workers (and the site's build beside them) then never wait on each other's threads for a
# core. With torch's default (one thread per core) OpenMP's waiting threads spin: the blocks
# of accumulation.md and update-loop.md took 32.8 CPU-s that way here, 11.6 with one thread.
# A block that needs more threads sets them (torch.set_num_threads). The build runs with the
# same setting, so `make build` after `make test` reuses what that build computed
# (hooks/build_cache.py keys on it).
export OMP_NUM_THREADS ?= 1

.PHONY: setup serve build test test-all test-versions lint lab bench clean

setup: $(PY_STAMP) $(JS_STAMP)

$(PY_STAMP): requirements.txt pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("Python 3.11 or newer is needed, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

$(JS_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

serve: setup
	$(BIN)/mkdocs serve --strict -a 127.0.0.1:8000

build: setup
	$(BIN)/mkdocs build --strict -d site

LINTED := code snippets tests hooks page_fences bench versions conftest.py
lint: setup
	$(BIN)/ruff check --no-cache $(LINTED)
	$(BIN)/ruff format --no-cache --check $(LINTED)
	$(BIN)/python -m page_fences.lint
	$(BIN)/mypy

# The inner loop, run after each change: lint, then every test but the heavy, slow and full ones
# (page_fences/tiers.py), the site built once in the background while the other tests run
# (tests/support/site_fixture.py; what it computes is cached by its inputs, hooks/build_cache.py)
# and one page of it audited in Chromium.
# Two workers (pytest-xdist), one per core of the machine the timings in README.md come from;
# `make test WORKERS=4` on a bigger one. A module's tests stay in one worker, and so do all of
# tests/browser (tests/support/xdist_scheduling.py), so that a fixture they share (the one
# reading of the site in the browser, say) is made once.
WORKERS ?= 2
INNER := not slow and not full and not heavy
test: setup lint
	$(BIN)/pytest -n $(WORKERS) --dist loadscope -m "$(INNER)"

# make test, then what it leaves out, each test once: the heavy tier on the workers (the
# browser's reading of every page, torchrun's quick tier, the page blocks that start gloo
# ranks, the tests whose runs are real processes killed and run again: the recipe's, the
# campaign's quick tier, the lab's resume in a new process), then, in one process as before,
# the slow runs in new processes (one-process and under torchrun) and the full fault campaigns.
test-all: test
	$(BIN)/pytest -n $(WORKERS) --dist loadscope -m heavy
	$(BIN)/pytest -m "slow or full" tests

# The pages' blocks and the ledger's test proofs on torch 2.8.0 (the course text's release) and
# the newest release pip installs here, each in an environment of its own under build/ (CUDA
# builds from the registry: 5.5-6.5 GB each, run on the CPU), and on .venv's torch. Results per
# claim land in docs/assets/versions/ and the What changed page renders them. Not part of
# make test-all or CI (gigabytes of download); the scheduled workflow runs it.
test-versions: setup
	$(BIN)/python -m versions

lab: setup
	$(BIN)/python -m resume_lab demo --output-dir build/lab

# Every measurement in bench/ (python -m bench); the numbers land in docs/assets/bench/ with
# the machine, versions and date, and the site words them when it is built.
bench: setup
	$(BIN)/python -m bench

# The built site, build/, and what the build computed (hooks/build_cache.py), so that the next
# build computes everything again.
clean:
	rm -rf site build $(VENV)/build-cache $(VENV)/pycache
