# Two entry points (see README): `make demo` runs a FedSAGD vs FedAvg client-perturbation study on the
# bundled digits data and holds it against the papers' bounds; `make test` runs the test suite. Both
# create .venv and install stabkit (idempotent). `make figures` refreshes the demo's figures (README, docs/bounds.md);
# `make docs` builds the documentation site.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# `make demo` installs stabkit and what it requires; `make test` adds the test tools and every optional extra,
# so that the whole suite runs (a user needs none of the extras)
BASE := $(VENV)/.stabkit-base
FULL := $(VENV)/.stabkit-full
EXTRAS ?= test,flower,privacy,tensorboard,docs,ray,parquet
# The index torch==2.13.0 comes from: empty is pip's default index, which serves the CPU build on the project's
# machines but the CUDA build (GBs of nvidia-* wheels) on most other Linux machines; for the CPU-only build
# there, `make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu`.
TORCH_INDEX ?=

.PHONY: demo test figures clean recipes atlas atlas-tuned docs

$(BASE): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install -q -e .
	touch $(BASE)

$(FULL): $(BASE)
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $(FULL)

DEMO := runs/demo

demo: $(BASE)
	$(VENV)/bin/stabkit pair --algo fedsagd --perturb client --local-rounds 0,50 --out $(DEMO)/fedsagd --overwrite
	$(VENV)/bin/stabkit pair --algo fedavg --perturb client --local-rounds 0,50 --out $(DEMO)/fedavg --overwrite
	$(VENV)/bin/stabkit bounds $(DEMO)/fedsagd $(DEMO)/fedavg --plot --out $(DEMO)/figures

RUN_FILES := config.json constants.json metrics.csv local.csv summary.json

# the demo's runs committed beside its figures (figures/README.md), the figures and fit table drawn from them
figures: demo
	for a in fedsagd fedavg; do mkdir -p figures/demo/data/$$a && \
	  (cd $(DEMO)/$$a && cp $(RUN_FILES) $(CURDIR)/figures/demo/data/$$a/) || exit 1; done
	$(VENV)/bin/stabkit bounds figures/demo/data/fedsagd figures/demo/data/fedavg --plot --out figures/demo
	rm -f figures/demo/*.pdf
	$(VENV)/bin/stabkit bounds figures/demo/data/fedsagd figures/demo/data/fedavg --format table > figures/demo/fit_table.txt

test: $(FULL)
	$(PY) -m pytest -q

# The documentation site (mkdocs.yml, docs/): built strictly (a broken link or reference fails) into site/.
docs: $(FULL)
	$(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf runs .pytest_cache site

# Figure recipes (figures/recipes/*.yaml): run each sweep, report it, copy its PNGs to figures/recipes/<name>/.
RECIPES := $(basename $(notdir $(wildcard figures/recipes/*.yaml)))

# each recipe's sweep is committed in figures/recipes/<r>/data and its figures drawn from there (figures/README.md)
recipes: $(BASE)
	@for r in $(RECIPES); do \
	  start=$$(date +%s); \
	  rm -rf runs/recipes/$$r figures/recipes/$$r/data && \
	  $(VENV)/bin/stabkit sweep figures/recipes/$$r.yaml --out runs/recipes/$$r --quiet && \
	  $(PY) figures/commit_sweep.py runs/recipes/$$r figures/recipes/$$r/data && \
	  $(VENV)/bin/stabkit report figures/recipes/$$r/data --bootstrap 0 --out figures/recipes/$$r && \
	  rm -f figures/recipes/$$r/*.pdf && \
	  echo "$$r: $$(( $$(date +%s) - start )) s" || exit 1; \
	done
	$(PY) figures/recipes/fedswa_flatness_landscape.py runs/recipes/fedswa_flatness_landscape

# The stability atlas (docs/measurements.md): the small suite, topped up to +-10% half-widths
# (its default), its page in runs/atlas/, the figures and tables of docs/measurements.md copied to figures/atlas/.
# ATLAS_ARGS="--no-top-up" runs the suite alone.
ATLAS := runs/atlas
ATLAS_ARGS ?=

atlas: $(BASE)
	$(VENV)/bin/stabkit atlas --suite small --out $(ATLAS) --workers 2 $(ATLAS_ARGS)
	mkdir -p figures/atlas
	cp $(ATLAS)/figures/*.png $(ATLAS)/summary.md $(ATLAS)/cells.md $(ATLAS)/link.json figures/atlas/

# The tuned small atlas (docs/atlas.md): the rate and the second hyperparameter tuned, edges extended; its
# tables committed in figures/atlas/tuned/data and its figures drawn from them (a test redraws and compares them).
TUNED := runs/atlas-tuned

atlas-tuned: $(BASE)
	$(VENV)/bin/stabkit atlas --suite small --tune lr,hp --out $(TUNED) --workers 2
	mkdir -p figures/atlas/tuned/data
	cp $(TUNED)/summary.md $(TUNED)/summary_equal.md $(TUNED)/cells.md figures/atlas/tuned/
	cp $(TUNED)/grid.csv $(TUNED)/cells.csv $(TUNED)/atlas.json $(TUNED)/extensions.json figures/atlas/tuned/data/
	$(PY) -c "from pathlib import Path; from stabkit.atlas.tunedpage import redraw; \
	  redraw(Path('figures/atlas/tuned/data'), Path('figures/atlas/tuned'))"
	rm -f figures/atlas/tuned/*.pdf
