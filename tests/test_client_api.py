"""client.api: the README's example, run as a user would, against real local servers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
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
        f"\nimport numpy as np\nnp.save({str(tmp_path / 'd.npy')!r}, reduced.to_numpy())\n"
        f"named.to_csv({str(tmp_path / 'named.csv')!r}, index=False)\n")
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
    sides = [tmp_path / "left.csv", tmp_path / "right.csv"]
    frame.iloc[:, :150].to_csv(sides[0], index=False)
    frame.iloc[:, 150:].to_csv(sides[1], index=False)
    by_columns = expected_selection(sides, 5, label="label", layout="columns")
    named = pd.read_csv(tmp_path / "named.csv")
    assert list(named.columns) == [*by_columns.columns, "label"]  # names and label released
    assert f"by columns: {[*by_columns.columns, 'label']}" in r.stdout
    assert np.array_equal(named.iloc[:, :5].to_numpy(), by_columns.reduced.values)
    assert named["label"].astype(str).tolist() == by_columns.labels


def test_the_api_takes_the_cli_names_and_refuses_unknown_options_with_its_errors(
        tmp_path: Path) -> None:
    from mpcnet.client import api

    with LocalCluster(tmp_path / "deploy") as cluster:  # configuration only: no server runs
        with api.connect(cluster.config_path, "hospital-a") as owner:
            with pytest.raises(api.InputError, match="share\\(\\) takes no option 'colums'; "
                               "its options are rows, columns, layout"):
                owner.share(tmp_path / "x.csv", "d", colums=True)
            with pytest.raises(api.InputError, match="rows and columns"):
                owner.share(tmp_path / "x.csv", "d", rows=True, columns=True)
            with pytest.raises(api.InputError, match="--release shares means shares only"):
                owner.share(tmp_path / "x.csv", "d", release=["shares", "values"])
        with api.connect(cluster.config_path, "analyst") as analyst:
            with pytest.raises(api.InputError, match="select\\(\\) takes no option 'top'"):
                analyst.select("d", 3, "r", top=3)
            with pytest.raises(api.InputError, match="train\\(\\) takes no option 'lr'"):
                analyst.train("r", "m", "clinic", lr=0.1)
