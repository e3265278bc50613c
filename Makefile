# The two commands of the README. Both work on a fresh machine with Python 3.11+.
PYTHON ?= python3

.PHONY: demo test bench accuracy network scaling

demo:  ## install, then run the whole product locally on the bundled dataset and check it
	$(PYTHON) -m pip install -q -e .
	$(PYTHON) -m client.demo

test:  ## install with the dev and benchmark tools, lint, type-check, and run the test suite (slow benchmarks skipped)
	$(PYTHON) -m pip install -q -e '.[dev,bench]'
	$(PYTHON) -m ruff check mpcnet parties client certs tests bench
	$(PYTHON) -m mypy mpcnet parties client certs
	$(PYTHON) -m pytest -q

bench:  ## in-process benchmark of the three paper shapes
	$(PYTHON) -m bench.inprocess

accuracy:  ## cross-validated accuracy table (RAW vs MS-GINI/GI/PCC/MI), about a minute
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) -m bench.accuracy

network:  ## the paper's shapes over TLS between local server processes, every setting (~2 min)
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) -m bench.network --repeat 5

scaling:  ## growth with m (to 100,000 rows), p and k, with plots (~7 min)
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) -m bench.scaling
