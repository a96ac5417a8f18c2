# Two entry points (see README): `make demo` runs a FedSAGD vs FedAvg client-perturbation study on the
# bundled digits data and holds it against the papers' bounds; `make test` runs the test suite. Both
# create .venv and install stabkit (idempotent). `make figures` refreshes the README's figures.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stabkit-installed

.PHONY: demo test figures clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

DEMO := runs/demo

demo: $(STAMP)
	$(VENV)/bin/stabkit pair --algo fedsagd --perturb client --local-rounds 0,50 --out $(DEMO)/fedsagd
	$(VENV)/bin/stabkit pair --algo fedavg --perturb client --local-rounds 0,50 --out $(DEMO)/fedavg
	$(VENV)/bin/stabkit bounds $(DEMO)/fedsagd $(DEMO)/fedavg --plot --out $(DEMO)/figures

figures: demo
	mkdir -p figures/demo
	cp $(DEMO)/figures/*.png figures/demo/
	$(VENV)/bin/stabkit bounds $(DEMO)/fedsagd $(DEMO)/fedavg --format table > figures/demo/fit_table.txt

test: $(STAMP)
	$(PY) -m pytest -q

clean:
	rm -rf runs .pytest_cache
