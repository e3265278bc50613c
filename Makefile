# The two commands of the README. Both work on a fresh machine with Python 3.11+: they make a
# virtual environment in .venv (distributions that mark their Python as externally managed
# refuse a bare `pip install`) and install into it; nothing outside the clone is touched.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test docs bench accuracy network scaling package-check test-join join kauto-check containers hosts

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

test-join: $(PY)  ## owners keyed by record IDs over TLS: 10^4 records each, 2 and 3 owners, every setting (~2 min)
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pytest -q -m slow tests/test_join_e2e.py

join: $(PY)  ## the alignment of two keyed owners of 10^5 records each over TLS, every setting
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m bench.join

kauto-check: $(PY)  ## select --k auto on real servers, LSVT and CogLoad, every setting, against plaintext --k auto (~10 min)
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pytest -q -m slow tests/test_e2e_kauto.py

containers: $(PY)  ## docker-compose.yml with Podman, 3 and 4 servers: healthchecks, the demo's pipeline, data kept over down/up (root, podman; 3 to 6 min)
	$(PY) -m pip install -q -e '.[dev,containers]'
	$(PY) -m pytest -q -s -m slow tests/test_deploy_containers.py

hosts: $(PY)  ## every server in a network namespace of its own, the clients in another: the pipeline over a LAN and the WAN profile (root; 1 to 2 min)
	$(PY) -m pip install -q -e '.[dev]'
	$(PY) -m pytest -q -s -m slow tests/test_deploy_hosts.py
