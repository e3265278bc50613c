"""The command lines: every option says what it does and its default, and every refusal that
suggests an option names one that exists."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpcnet.certs.main import parser as certs_parser
from mpcnet.client.demo import parser as demo_parser
from mpcnet.client.main import parser as client_parser
from mpcnet.dataset import EncodingOptions, read_csv
from mpcnet.errors import MPCError
from mpcnet.parties import catalog
from mpcnet.parties.main import parser as party_parser


def _options(p: argparse.ArgumentParser, where: str) -> Iterator[tuple[str, argparse.Action]]:
    """Every optional option of ``p`` and of its subcommands (not those one of which must be
    given), with the command it belongs to."""
    chosen = {id(a) for g in p._mutually_exclusive_groups if g.required for a in g._group_actions}
    for action in p._actions:
        if id(action) in chosen:
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, f"{where} {name}")
        elif action.option_strings and not isinstance(action, argparse._HelpAction
                                                      | argparse._VersionAction):
            yield where, action


PARSERS = {"mpc-client": client_parser, "mpc-party": party_parser, "mpc-certs": certs_parser,
           "mpc-demo": demo_parser}


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_every_option_has_a_help_text_with_its_default(prog: str) -> None:
    options = list(_options(PARSERS[prog](), prog))
    assert options
    for where, action in options:
        name = f"{where} {action.option_strings[0]}"
        assert action.help, f"{name} has no help text"
        if not action.required:  # a required one has none
            assert "default" in action.help, f"{name} does not say its default: {action.help}"


def _refusal(fn: object, *args: object, **kwargs: object) -> str:
    with pytest.raises(MPCError) as err:
        fn(*args, **kwargs)  # type: ignore[operator]
    return str(err.value)


def test_refusals_suggest_only_options_that_exist(tmp_path: Path) -> None:
    share = next(a.choices["share"] for a in client_parser()._actions
                 if isinstance(a, argparse._SubParsersAction))
    exists = {s for a in share._actions for s in a.option_strings}
    csv = tmp_path / "a.csv"
    csv.write_text("a,b,y\n1,x,p\n2,,q\n3O,z,p\n4,w,q\n")
    rows = catalog.contribution_meta(dataset="d", upload_id="u1", layout="rows",
                                     sharing="passive3", rows=4, columns=["a", "b"],
                                     exponents=[0, 0], categories={"b": ["w", "x", "z"]},
                                     label="y", classes=["p", "q"])
    entry = dict(catalog.entry(rows, "o1"), seq=1)
    view = catalog.assemble("d", "rows", "passive3", [entry]) | {"owners": ["o1"]}
    messages = [
        _refusal(read_csv, csv, label="y"),  # text in a numeric column
        _refusal(read_csv, csv, label="y", options=EncodingOptions("ordinal", "zero")),  # typo
        _refusal(read_csv, csv, label="y", options=EncodingOptions(ordinal_columns=("a", "b"))),
        _refusal(catalog.check_against, view, dict(rows, id="u2", categories={}), "o2"),
        _refusal(catalog.check_against, view, dict(rows, id="u2", label="b"), "o2"),
        _refusal(catalog.check_against, view, dict(rows, id="u2", layout="columns"), "o2"),
        _refusal(catalog.check_against, None, dict(rows, label=None, classes=None), "o1"),
    ]
    named = {opt for msg in messages for opt in re.findall(r"--[a-z][a-z-]*", msg)}
    assert {"--drop", "--categorical", "--ordinal", "--missing", "--label", "--rows"} <= named
    assert named <= exists, f"refusals name options that do not exist: {named - exists}"


def test_the_demo_checks_its_arguments_before_starting_anything() -> None:
    import subprocess
    import sys
    import time

    from conftest import ROOT

    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "mpcnet.client.demo", "--k", "400"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "between 1 and 310" in r.stderr and r.stdout == "", r
    assert time.monotonic() - t0 < 10  # no server was started


def test_the_job_figures_show_the_planner_choice() -> None:
    from mpcnet.client.main import figures_text

    plan = {"method": "network", "comparisons": 290208, "stages": 84, "levels": 1,
            "alternative": "ranking ruled out: 41,000 MiB of comparisons over the 1,792 MiB "
                           "budget", "block_columns": 1, "blocks": 20000, "tile_rows": 700,
            "tiles": 2, "row_blocks": 3}
    text = figures_text({"phases": {}, "seconds": 1.0, "rounds": 9, "bytes_sent": 10,
                         "plan": plan})
    assert "top-k by network: 290,208 comparisons in 84 stage(s)" in text
    assert "20000 block(s) of 1 column(s), each in 2 tiles of 700 rows" in text
    assert "(other: ranking ruled out" in text


def test_json_goes_before_or_after_the_command() -> None:
    from mpcnet.client.main import parser

    for argv in (["--json", "datasets"], ["datasets", "--json"], ["plaintext", "a.csv", "--k",
                                                                   "2", "--json"]):
        assert parser().parse_args(argv).json is True
    assert parser().parse_args(["datasets"]).json is False


def test_listings_describe_trainings_and_models_as_what_they_are() -> None:
    from types import SimpleNamespace

    from mpcnet.client.main import _listing_text

    dep = SimpleNamespace(servers=[1, 2, 3])
    job = {"id": "j1", "created": 0, "state": "done", "kind": "train", "dataset": "top10",
           "k": 0, "security": "active3", "result": "lr", "model_owner": "clinic",
           "figures": {"seconds": 1.0, "rounds": 9}}
    line = _listing_text("jobs", {"alice": [job]}, dep, {})
    assert "train top10/active3 -> model lr for clinic" in line and "k=0" not in line
    model = {"name": "lr", "kind": "model", "dataset": "top10", "security": "active3",
             "job": "j1", "owner": "clinic", "analyst": "analyst", "parties": ["a", "b", "c"],
             "rows": 0, "k": 0, "score": None, "share_with": []}
    line = _listing_text("results", {"alice": [model]}, dep, {})
    assert "model trained on 'top10'" in line and "by analyst for clinic" in line


def test_plaintext_refusals_name_the_files_not_a_dataset(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    from mpcnet.client.main import main

    path = tmp_path / "a.csv"
    path.write_text("a;b;y\n1;2;0\n3;5;1\n")
    assert main(["plaintext", str(path), "--label", "y", "--k", "3", "--delimiter", ";"]) == 2
    err = capsys.readouterr().err
    assert "the files: k must be between 1 and 2" in err and "'local'" not in err
    assert main(["plaintext", str(path), "--label", "y", "--k", "2", "--delimiter", ";"]) == 0
