# tdescope: `make run` sets up and opens the workbench; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup system-tools run test lint bench bench-quick clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

system-tools:
	@bash packaging/install-system-tools.sh

setup: $(STAMP) system-tools

run: setup
	$(VENV)/bin/tdescope gui --lab sqlcipher

test: setup
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider
	$(VENV)/bin/lint-imports

lint: setup
	$(VENV)/bin/lint-imports

bench: setup
	$(PY) -m bench

bench-quick: setup
	$(PY) -m bench --quick

clean:
	rm -rf $(VENV) build *.egg-info
