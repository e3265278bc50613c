"""client.api: the README's example, run as a user would, against real local servers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from conftest import ROOT

from mpcnet.client.local import LocalCluster
from mpcnet.client.plain import expected_selection

MARK = "<!-- the example tests/test_client_api.py runs -->"


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(re.escape(MARK) + r"\n```python\n(.*?)```", text, re.S)
    assert block, "the README lost its API example"
    return block.group(1)


def test_the_readme_example_runs_and_gives_the_plaintext_selection(tmp_path: Path) -> None:
    script = readme_example() + (  # then keep what it fetched, to compare
        f"\nimport numpy as np\nnp.save({str(tmp_path / 'd.npy')!r}, reduced.to_numpy())\n")
    with LocalCluster(tmp_path / "deploy") as cluster:
        cluster.start()
        script = script.replace('"deploy/local.toml"', repr(str(cluster.config_path)))
        r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "(126, 10)" in r.stdout and "refused:" in r.stdout and "k must be" in r.stdout
    assert " s pcc" in r.stdout  # the job record names its score
    assert re.search(r"predicted: \[('\d', ){4}'\d'\] of \['\d', '\d'\]", r.stdout), r.stdout
    import pandas as pd

    frame = pd.read_csv(ROOT / "data" / "lsvt_126x310.csv")
    halves = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:63].to_csv(halves[0], index=False)
    frame.iloc[63:].to_csv(halves[1], index=False)
    want = expected_selection(halves, 10, label="label").reduced.values
    assert np.array_equal(np.load(tmp_path / "d.npy"), want)
