"""The layering of docs/design.md, section 2: nothing below imports from above."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

# lower number = lower layer; a module may import its own layer and the layers below it
LAYERS = {
    "mpcnet.errors": 0, "mpcnet.ring": 0, "mpcnet.ring128": 0, "mpcnet.gf64": 0, "mpcnet.prf": 0,
    "mpcnet.fixedpoint": 0,
    "mpcnet.dataset": 1, "mpcnet.encoded": 1, "mpcnet.plain": 1, "mpcnet.recordids": 1,
    "mpcnet.config": 2, "mpcnet.identity": 2, "mpcnet.pins": 2, "mpcnet.jobrequest": 2,
    "mpcnet.net": 2,
    "mpcnet.signing": 2,
    "mpcnet.schemes": 3,
    "mpcnet.ops": 4,
    "mpcnet.featsel": 5, "mpcnet.train": 5,
    "mpcnet.certs": 6, "mpcnet.parties": 7, "mpcnet.client": 7,
}


def _layer(module: str) -> int | None:
    best = None
    for prefix, level in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, level)
    return None if best is None else best[1]


def _modules() -> list[tuple[str, Path]]:
    out = []
    for top in ("mpcnet", "mpcnet/parties", "mpcnet/client", "mpcnet/certs"):
        for path in sorted((ROOT / top).rglob("*.py")):  # rglob does not enter the symlinks
            parts = path.relative_to(ROOT).with_suffix("").parts
            out.append((".".join(p for p in parts if p != "__init__"), path))
    return out


def test_every_module_has_a_layer_and_a_docstring() -> None:
    for module, path in _modules():
        if module in LAYERS or module.split(".")[0] != "mpcnet" or module == "mpcnet":
            continue
        assert _layer(module) is not None, f"{module} is in no layer of tests/test_layers.py"
        if path.stat().st_size:
            assert ast.get_docstring(ast.parse(path.read_text())), f"{module} has no docstring"


def test_imports_point_downward() -> None:
    bad = []
    for module, path in _modules():
        own = _layer(module)
        if own is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                target = _layer(name)
                if target is not None and target > own:
                    bad.append(f"{module} (layer {own}) imports {name} (layer {target})")
    assert not bad, "\n".join(bad)


def test_server_client_and_certs_are_imported_under_mpcnet() -> None:
    """parties/, client/ and certs/ install as mpcnet.parties, mpcnet.client and mpcnet.certs
    (docs/design.md, section 2): importing them by their folder names would load a second copy
    of each module in a clone and fail in an installed wheel."""
    bad = []
    tops = ("mpcnet", "parties", "client", "certs", "tests", "bench")
    for path in sorted(p for top in tops for p in (ROOT / top).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module
                and node.level == 0 else [])
            bad += [f"{path.relative_to(ROOT)}: {n}" for n in names
                    if n.split(".")[0] in ("parties", "client", "certs")]
    assert not bad, "\n".join(bad)
