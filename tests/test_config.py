"""The deployment file: shipped examples, relative paths, defaults and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from mpcnet import config
from mpcnet.client.local import write_config
from mpcnet.config import check_name
from mpcnet.errors import ConfigError, InputError


def test_local_deployments_parse_with_paths_relative_to_the_file() -> None:
    dep = config.load(ROOT / "deploy" / "local.toml")
    assert [s.name for s in dep.servers] == ["alice", "bob", "carol"]
    assert dep.leader.name == "alice" and dep.party("carol") == 2
    assert dep.tls_dir == ROOT / "deploy" / "certs"
    assert dep.server("bob").key == ROOT / "deploy" / "certs" / "bob.key"
    assert dep.server("bob").data_dir == ROOT / "deploy" / "data" / "bob"
    roles = {c.name: c.role for c in dep.clients}
    assert sorted(roles.values()) == ["analyst", "analyst", "model-owner", "owner", "owner"]
    four = config.load(ROOT / "deploy" / "local4.toml")
    assert [s.name for s in four.servers] == ["alice", "bob", "carol", "dave"]
    assert {s.port for s in four.servers}.isdisjoint({s.port for s in dep.servers})


def test_defaults_are_documented_values() -> None:
    t = config.Timeouts()
    assert t.connect > 0 and t.round > 0 and t.probe < t.connect


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "d.toml"
    p.write_text(text)
    return p


SERVERS = "".join(f'[[servers]]\nname = "{n}"\nhost = "127.0.0.1"\nport = {7000 + i}\n'
                  for i, n in enumerate(["a", "b", "c"]))


def test_minimal_file_gets_defaults(tmp_path: Path) -> None:
    dep = config.load(_write(tmp_path, SERVERS + '[[clients]]\nname = "x"\nrole = "owner"\n'))
    assert dep.server("a").cert == tmp_path / "certs" / "a.pem"
    assert dep.server("c").data_dir == tmp_path / "data" / "c"
    assert dep.timeouts == config.Timeouts()
    assert dep.memory_budget == 2 << 30
    assert dep.client("x").may_upload("anything")
    assert dep.identity("x") == (tmp_path / "certs" / "x.pem", tmp_path / "certs" / "x.key")


@pytest.mark.parametrize("extra, words", [
    ('[[clients]]\nname = "a"\nrole = "owner"\n', "unique"),
    ('[[clients]]\nname = "x"\nrole = "boss"\n', "role"),
    ('[deployment]\nround_timout = 3\n', "unknown key"),
    ('[deployment]\nround_timeout = -1\n', "positive"),
    ('[nonsense]\n', "unknown section"),
    ('[deployment]\nmemory_budget = "2 parsecs"\n', "memory_budget must be a size"),
    ('[deployment]\nmemory_budget = 1000\n', "at least 64 MiB"),
    ('[[clients]]\nname = "../x"\nrole = "owner"\n', "name"),
    ('[tls]\nca = "certs/ca.pem"\n', "trusts no certificate authority"),
    ('[[clients]]\nname = "x"\nrole = "owner"\npin = "abc"\n', "pin must be"),
    ('[[clients]]\nname = "x"\nrole = "owner"\npin = ["sha256:' + "A" * 64 + '"]\n',
     "pin must be"),
    ('[[clients]]\nname = "x"\nrole = "owner"\npin = ' + str(["sha256:" + "a" * 64] * 5)
     .replace("'", '"') + "\n", "up to 4"),
])
def test_mistakes_are_refused_with_the_file_named(tmp_path: Path, extra: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as err:
        config.load(_write(tmp_path, SERVERS + extra))
    assert str(tmp_path) in str(err.value)


def test_wrong_server_count_port_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="3 or 4"):
        config.load(_write(tmp_path, '[[servers]]\nname = "a"\nhost = "h"\nport = 1\n'))
    with pytest.raises(ConfigError, match="port"):
        config.load(_write(tmp_path, SERVERS.replace("7002", "70000")))
    with pytest.raises(ConfigError, match="not found"):
        config.load(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="no server named"):
        config.load(_write(tmp_path, SERVERS)).server("zed")


def test_dataset_names_cannot_escape_the_data_folder() -> None:
    assert config.check_name("dataset", "lsvt-1.a") == "lsvt-1.a"
    for bad in ("../x", "", ".hidden", "a/b", "x" * 65):
        with pytest.raises(InputError):
            config.check_name("dataset", bad)


def test_names_with_a_trailing_newline_are_refused(tmp_path: Path) -> None:
    for bad in ("name\n", "name\n\n", "\nname", "na\nme", "../name", ".name", "", "a" * 65):
        with pytest.raises(InputError, match="not allowed"):
            check_name("dataset", bad)
    assert check_name("dataset", "study-2.v1_x") == "study-2.v1_x"
    path = write_config(tmp_path, 3)
    path.write_text(path.read_text().replace('name = "bob"', 'name = "bob\\n"'))
    with pytest.raises(ConfigError, match="name must be"):
        config.load(path)


@pytest.mark.parametrize("text, size", [("1500 MB", 1_500_000_000), ('"2 GiB"', 2 << 30),
                                        ("3221225472", 3 << 30), ("512MiB", 512 << 20)])
def test_memory_budget_takes_sizes_with_units(tmp_path: Path, text: str, size: int) -> None:
    value = text if text.startswith('"') or text.isdigit() else f'"{text}"'
    dep = config.load(_write(tmp_path, f"[deployment]\nmemory_budget = {value}\n" + SERVERS))
    assert dep.memory_budget == size


def test_pins_are_one_fingerprint_or_a_list(tmp_path: Path) -> None:
    one, two, three = ("sha256:" + d * 64 for d in "123")
    dep = config.load(_write(tmp_path, SERVERS.replace('name = "a"', f'name = "a"\npin = "{one}"')
                             + f'[[clients]]\nname = "x"\nrole = "owner"\npin = ["{two}", '
                             f'"{three}", "{two}"]\n'))
    assert dep.pins("a") == (one,) and dep.pins("x") == (two, three)
    assert dep.pins("b") == () and dep.pins("nobody") == ()
    with pytest.raises(ConfigError, match=f"the key {one} is pinned for a and for x"):
        config.load(_write(tmp_path, SERVERS.replace('name = "a"', f'name = "a"\npin = "{one}"')
                           + f'[[clients]]\nname = "x"\nrole = "owner"\npin = "{one}"\n'))
