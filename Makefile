# The two commands of the README: `make book` and `make test`. Both set the project up first:
# a virtual environment in .venv with the package and its dependencies, and the Fashion-MNIST data.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
SCALE ?= cpu
JOBS ?= 1
FMNIST_DEBIAN := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
export ENSDIV_CACHE ?= $(CURDIR)/.cache/ensdiv
PYTEST_WORKERS ?= 2
MATHJAX := .cache/mathjax/es5/tex-mml-chtml.js
TEST_BOOK := $(CURDIR)/_build/test-book

# The locked environment: every package at the exact version and hash of requirements.lock, made from pyproject.toml
# by uv for CPython 3.11 on Linux x86-64 (make lock). UNLOCKED=1 installs from pyproject.toml's lower bounds
# instead (another platform); results are then keyed by the installed versions (ensdiv.environment).
UV := uv==0.13.9
LOCK_FLAGS := pyproject.toml --extra book --extra test --extra attacks --extra lock \
	--override requirements-overrides.txt --generate-hashes --python-version 3.11.7 \
	--python-platform x86_64-manylinux_2_28 -o requirements.lock

.PHONY: setup data mathjax browser book test test-fast dry-run bench lint lock upgrade clean help

help:
	@echo "make book   - set up, run every notebook at SCALE=$(SCALE), JOBS=$(JOBS) pages at a time, build _build/html"
	@echo "make test   - set up, run the unit tests and every notebook at smoke scale"
	@echo "make test-fast - the unit tests and doctests only: no notebook, no multi-process test"
	@echo "make lock   - remake requirements.lock after a change to pyproject.toml (keeps every other pin)"
	@echo "make upgrade - move requirements.lock to the newest allowed versions (see README: what that re-runs)"
	@echo "make dry-run - dry-run the paper presets whose ledger entry is stale, on fake data (DRY_ALL=1: every page)"
	@echo "make bench  - run benchmarks/ and write benchmarks/results/*.json"
	@echo "after make book: $(PY) -m http.server -d _build/html 8000, then open http://localhost:8000"

setup: $(VENV)/.installed data mathjax

$(VENV)/.installed: requirements.lock pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
ifeq ($(UNLOCKED),1)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[book,test]"
	$(PY) -m pip install -q --no-deps "torchattacks>=3.5"  # see pyproject.toml: its requests pin is spurious
else
	$(PY) -m pip install -q --no-deps --require-hashes -r requirements.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
endif
	@touch $@

lock:
	@test -x $(VENV)/bin/uv || $(PY) -m pip install -q "$(UV)"
	$(VENV)/bin/uv pip compile $(LOCK_FLAGS)
	$(PY) -c 'import ensdiv.environment as e; e.main(["--conda", "environment.yml"])'

upgrade:
	@test -x $(VENV)/bin/uv || $(PY) -m pip install -q "$(UV)"
	$(VENV)/bin/uv pip compile --upgrade $(LOCK_FLAGS)
	$(PY) -c 'import ensdiv.environment as e; e.main(["--conda", "environment.yml"])'

# Fashion-MNIST: $ENSDIV_DATA, else Debian's package (installed here when apt is usable),
# else torchvision downloads it on first use (see ensdiv/data/fashion.py).
data:
	@if [ -n "$$ENSDIV_DATA" ] || [ -f $(FMNIST_DEBIAN) ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "Installing Debian's dataset-fashion-mnist ..."; \
	  (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist >/dev/null) \
	    || echo "apt could not install dataset-fashion-mnist; torchvision will try to download it."; \
	else echo "Fashion-MNIST not installed and apt not usable; torchvision will try to download it."; fi

# Offline math: MathJax 3 (the npm package mathjax@3, its es5 bundle) in .cache/mathjax/es5; `ensdiv book`
# serves it from the site (ENSDIV_MATHJAX names another copy). Without npm or a registry the pages load
# MathJax from the CDN.
mathjax: $(MATHJAX)

$(MATHJAX):
	@if command -v npm >/dev/null; then \
	  tmp=$$(mktemp -d) && (cd $$tmp && npm pack --silent mathjax@3 >/dev/null && tar -xzf mathjax-*.tgz) \
	    && mkdir -p .cache/mathjax && rm -rf .cache/mathjax/es5 && mv $$tmp/package/es5 .cache/mathjax/es5 \
	    && echo "MathJax $$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' $$tmp/package/package.json) in .cache/mathjax/es5" \
	    || echo "npm could not fetch mathjax@3; the book's pages will load MathJax from the CDN."; \
	  rm -rf $$tmp; \
	else echo "npm not found; the book's pages will load MathJax from the CDN."; fi

# The browser test (tests/test_book_browser.py) needs Chromium and its driver; it is skipped without them.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "Installing Debian's chromium and chromium-driver (for the browser test) ..."; \
	  (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null) \
	    || echo "apt could not install chromium; the browser test will be skipped."; \
	else echo "chromium not installed and apt not usable; the browser test will be skipped."; fi

book: setup
	$(VENV)/bin/ensdiv book --scale $(SCALE) --jobs $(JOBS)

test: setup browser
	$(VENV)/bin/ruff check ensdiv tests benchmarks notebooks
	$(VENV)/bin/ruff format --check notebooks  # the book's column width (notebooks/ruff.toml)
	rm -rf $(TEST_BOOK)
	ENSDIV_TEST_BOOK=$(TEST_BOOK) $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -q --durations=25 tests ensdiv
	# every page of the smoke book those tests executed, rendered and opened in a browser
	ENSDIV_TEST_BOOK=$(TEST_BOOK) $(PY) -m pytest -q tests/book_pages_check.py

# the unit tests and doctests: no notebook or page kernel is executed, no multi-process (DDP, torchrun) test runs
test-fast: setup
	$(VENV)/bin/ruff check ensdiv tests benchmarks notebooks
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -q --durations=15 -m "not notebook and not slow and not kernel" tests ensdiv

# the pages whose dry-run ledger entry (tests/dry_runs.json) is missing or stale (make test also runs three every
# time), each recorded there when it passes; DRY_ALL=1 runs every page (about 40 minutes on two cores)
dry-run: setup
	# one worker: two ImageNet-size trainings at once (Packed-Ensembles Table 2 beside design-diversity Sec. 4.3.1)
	# peaked at about 11 GB each and the kernel killed one on the 24 GB machine
	ENSDIV_DRY_RECORD=1 ENSDIV_DRY_ALL=$(DRY_ALL) $(PY) -m pytest -q -n 1 --durations=0 tests/test_dry_run.py

bench: setup
	$(VENV)/bin/ensdiv bench

lint: setup
	$(VENV)/bin/ruff check ensdiv tests benchmarks notebooks
	$(VENV)/bin/ruff format --check notebooks

clean:
	rm -rf _build
