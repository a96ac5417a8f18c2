# Two entry points (see README): `make demo` runs a FedSAGD client-perturbation study on the bundled
# digits data; `make test` runs the test suite. Both create .venv and install stabkit (idempotent).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stabkit-installed

.PHONY: demo test bench clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/stabkit pair --algo fedsagd --perturb client --out runs/demo

test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf runs .pytest_cache
