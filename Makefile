# Quick start (README): `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
OUT    ?= results

.PHONY: run test test-gpu install clean

# -qq for the project: setuptools announces every editable install through a meta path
# finder (our package-dir maps core/ to sbmlgpu, as DESIGN.md lays out) with an
# information-only notice; errors still show.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -qq -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# The main job on a bundled model: an ODE time course, written as CSV plus a plot.
run: $(STAMP)
	$(VENV)/bin/sbmlgpu run sbml_models/seir_epidemic.xml --end 160 --points 321 -o $(OUT) --plot

test: $(STAMP)
	$(PY) -m pytest -q

# On the GPU machine (see docs/gpu-machine.md): only the tests that need a GPU.
test-gpu:
	python3 -m pytest -q -m gpu

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache
