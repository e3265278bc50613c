"""The package as users install it (pyproject.toml, setup.py, MANIFEST.in): a wheel and an sdist
built from the clone, each installed into a fresh virtual environment outside it, run the demo
and a client command there. Slow (a build and two installs from PyPI): `make package-check`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

from mpcnet import __version__

pytestmark = pytest.mark.slow


def _run(args: list[str | Path], cwd: Path, timeout: float = 900) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, f"{args} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=out)
    return out


def test_the_wheel_holds_only_mpcnet(dist: Path) -> None:
    (wheel,) = dist.glob("mpcnet-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"mpcnet", f"mpcnet-{__version__}.dist-info"}
    for inside in ("mpcnet/parties/server.py", "mpcnet/client/api.py", "mpcnet/certs/pki.py",
                   "mpcnet/data/lsvt_126x310.csv", "mpcnet/py.typed"):
        assert inside in names
    assert any(n.startswith("mpcnet/_ring128.") and n.endswith(".so") for n in names)


@pytest.mark.parametrize("kind", ["whl", "tar.gz"])
def test_installed_outside_the_clone(dist: Path, tmp_path: Path, kind: str) -> None:
    (artefact,) = dist.glob(f"mpcnet-*.{kind}")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    _run([bin_dir / "python", "-m", "pip", "install", "-q", artefact], cwd=tmp_path)
    for command in ("mpc-party", "mpc-client", "mpc-certs", "mpc-demo"):
        assert _run([bin_dir / command, "--version"], cwd=tmp_path).split() == [
            command, __version__]
    where = _run([bin_dir / "python", "-c", "import mpcnet, mpcnet.client.api as api; "
                  "from mpcnet.dataset import bundled; print(mpcnet.__file__); "
                  "print(bundled('lsvt'))"], cwd=tmp_path).split()
    assert all(Path(w).is_relative_to(env_dir) for w in where), where
    demo = _run([bin_dir / "mpc-demo"], cwd=tmp_path)
    assert "D' equals the plaintext selection: yes" in demo, demo
    plain = json.loads(_run([bin_dir / "mpc-client", "--json", "plaintext", where[1],
                             "--label", "label", "--k", "5"], cwd=tmp_path))
    assert len(plain["columns"]) == 5 and plain["rows"] == 126
