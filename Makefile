# The two commands of the README: `make book` and `make test`. Both set the project up first:
# a virtual environment in .venv with the package and its dependencies, and the Fashion-MNIST data.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
SCALE ?= cpu
FMNIST_DEBIAN := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
export ENSDIV_CACHE ?= $(CURDIR)/.cache/ensdiv
PYTEST_WORKERS ?= 2

.PHONY: setup data book test bench lint clean help

help:
	@echo "make book   - set up, run every notebook at SCALE=$(SCALE), build _build/html"
	@echo "make test   - set up, run the unit tests and every notebook at smoke scale"
	@echo "make bench  - run benchmarks/ and write benchmarks/results/*.json"

setup: $(VENV)/.installed data

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[book,test]"
	$(PY) -m pip install -q --no-deps "torchattacks>=3.5"  # see pyproject.toml: its requests pin is spurious
	@touch $@

# Fashion-MNIST: $ENSDIV_DATA, else Debian's package (installed here when apt is usable),
# else torchvision downloads it on first use (see ensdiv/data/fashion.py).
data:
	@if [ -n "$$ENSDIV_DATA" ] || [ -f $(FMNIST_DEBIAN) ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "Installing Debian's dataset-fashion-mnist ..."; \
	  (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist >/dev/null) \
	    || echo "apt could not install dataset-fashion-mnist; torchvision will try to download it."; \
	else echo "Fashion-MNIST not installed and apt not usable; torchvision will try to download it."; fi

book: setup
	$(VENV)/bin/ensdiv book --scale $(SCALE)

test: setup
	$(VENV)/bin/ruff check ensdiv tests benchmarks notebooks
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup -q tests ensdiv

bench: setup
	$(VENV)/bin/ensdiv bench

lint: setup
	$(VENV)/bin/ruff check ensdiv tests benchmarks notebooks

clean:
	rm -rf _build
