# The two commands of the README. Both work on a fresh machine with Python 3.11+: they make a
# virtual environment in .venv (distributions that mark their Python as externally managed
# refuse a bare `pip install`) and install into it; nothing outside the clone is touched.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test docs bench accuracy network scaling package-check

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

demo: $(PY)  ## install, then run the whole product locally on the bundled dataset and check it
	$(PY) -m pip install -q -e .
	$(PY) -m mpcnet.client.demo

test: $(PY)  ## install with the dev, API, docs and benchmark tools; lint, type-check, build the docs, run the tests (slow ones skipped)
	$(PY) -m pip install -q -e '.[dev,api,bench,docs,parquet]'
	$(PY) -m ruff check mpcnet parties client certs tests bench
	$(PY) -m mypy mpcnet
	$(PY) -m mkdocs build --strict --quiet
	$(PY) -m pytest -q

docs: $(PY)  ## the documentation site with the API reference from the docstrings (build/site); any warning fails it
	$(PY) -m pip install -q -e '.[docs]'
	$(PY) -m mkdocs build --strict --quiet

bench: $(PY)  ## in-process benchmark of the three paper shapes
	$(PY) -m bench.inprocess

accuracy: $(PY)  ## cross-validated accuracy table (RAW vs MS-GINI/GI/PCC/MI and the private scores), about 22 min
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m bench.accuracy

network: $(PY)  ## the paper's shapes over TLS between local server processes, every setting (~2 min)
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m bench.network --repeat 5

scaling: $(PY)  ## growth with m (to 100,000 rows), p and k, with plots (~7 min)
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m bench.scaling

package-check: $(PY)  ## build the wheel and the sdist, install each in a fresh venv outside the clone, run the demo there (~4 min)
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pytest -q -m slow tests/test_packaging.py
