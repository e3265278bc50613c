"""The documentation (README.md, CHANGELOG.md, docs/, bench/README.md): the README stays a short
page for users, every relative link resolves in the repository, and every option of the commands
is documented on the page for its reader."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from conftest import ROOT

from mpcnet.certs.main import parser as certs_parser
from mpcnet.client.main import parser as client_parser
from mpcnet.parties.main import parser as party_parser

PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md",
                *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def _slug(heading: str) -> str:
    """The anchor a heading gets (GitHub's and mkdocs' rule for the characters used here)."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(page: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in page.read_text().splitlines()
            if line.startswith("#")}


def test_readme_is_a_short_page_without_history() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250, "README.md: at most 250 lines; the rest goes to docs/"
    assert not HASH.findall(text), f"README.md names commit hashes: {HASH.findall(text)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    in_code = False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"line {number}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"line {number}: {target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)


def _options(p: argparse.ArgumentParser) -> set[str]:
    found = set()
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
        found |= {o for o in action.option_strings if o.startswith("--")}
    return found - {"--help", "--version"}


@pytest.mark.parametrize("make_parser, page", [
    (client_parser, "docs/user-guide.md"),
    (party_parser, "docs/operations.md"),
    (certs_parser, "docs/operations.md"),
], ids=["mpc-client", "mpc-party", "mpc-certs"])
def test_every_option_is_documented(make_parser: object, page: str) -> None:
    text = (ROOT / page).read_text()
    missing = sorted(o for o in _options(make_parser())  # type: ignore[operator]
                     if not re.search(re.escape(o) + r"(?![\w-])", text))
    assert not missing, f"{page} does not mention {', '.join(missing)}"
