"""Layer: deployment. The one TOML file every host of a deployment shares, as frozen dataclasses.

The same file is read by the servers (``mpc-party``), the clients (``mpc-client``), the
key tool (``mpc-certs``) and docker-compose checks. Relative paths in it are relative to the
folder of the file itself, so a deployment folder can be moved or mounted as a whole. It is the
trust root of the deployment: it pins the public key of every server and client (``pin``, the
SHA-256 of the key; ``mpcnet.pins``), and nobody is admitted whose key it does not pin. Each
server's operator keeps its own copy and decides whom it admits (docs/operations.md).

Example (see ``deploy/local.toml``)::

    [deployment]
    connect_timeout = 30.0     # seconds a server or client keeps retrying to reach a peer
    round_timeout = 60.0       # seconds a protocol round may wait for a peer's message

    [tls]
    dir = "certs"              # the pinned certificates (public) and this host's own key

    [[servers]]                # in party order: the first server coordinates jobs
    name = "alice"
    host = "127.0.0.1"
    port = 7101
    data_dir = "data/alice"
    pin = "sha256:9f86d08..."  # its key's fingerprint (mpc-certs keygen prints it); a list
                               # of two during a key change

    [[clients]]
    name = "hospital-a"
    role = "owner"             # owner: may upload; analyst: may run jobs and fetch results;
                               # model-owner: may receive the models trained for it
    datasets = ["*"]           # owners only: datasets it may contribute to ("*" = any)
    pin = "sha256:60303ae..."
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpcnet.errors import ConfigError

ROLES = ("owner", "analyst", "model-owner")
# used with fullmatch: "$" would also accept a trailing newline ("name\n")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
PIN_RE = re.compile(r"sha256:[0-9a-f]{64}")  # SHA-256 of a public key (mpcnet.pins)
MAX_PINS = 4  # a name has one key, two during a key change


@dataclass(frozen=True)
class Timeouts:
    """Every bound on waiting, in seconds: nothing waits forever."""

    connect: float = 30.0    # keep retrying an unreachable peer this long (exponential backoff)
    handshake: float = 10.0  # TLS handshake and hello exchange of one connection
    round: float = 60.0      # one protocol round (RoundEngine round_timeout)
    request: float = 60.0    # one client request/response (uploads: per frame)
    probe: float = 2.0       # a client reaching a server; the mesh probe of ``status``


@dataclass(frozen=True)
class ServerConfig:
    """One MPC server. Its position in ``servers`` is its party number."""

    name: str
    host: str                 # address peers and clients connect to
    port: int                 # one TLS port for peers and clients; the certificate tells them apart
    data_dir: Path            # durable storage of this server (datasets, results, jobs)
    cert: Path                # this server's certificate (default: <tls.dir>/<name>.pem)
    key: Path                 # its private key (default: <tls.dir>/<name>.key), mode 0600
    listen: str = ""          # address to bind; "" means ``host`` (docker: "0.0.0.0")
    pins: tuple[str, ...] = ()  # fingerprints of the keys it may present (mpcnet.pins)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def bind(self) -> str:
        return self.listen or self.host


@dataclass(frozen=True)
class ClientConfig:
    """One client identity (a data owner, an analyst or a model owner) and what it may do."""

    name: str
    role: str                           # "owner", "analyst" or "model-owner"
    cert: Path
    key: Path
    datasets: tuple[str, ...] = ("*",)  # owners: dataset names it may contribute to
    pins: tuple[str, ...] = ()          # fingerprints of the keys it may present

    def may_upload(self, dataset: str) -> bool:
        return self.role == "owner" and ("*" in self.datasets or dataset in self.datasets)


@dataclass(frozen=True)
class Deployment:
    """The whole deployment: servers in party order, clients, their pins, TLS files and
    limits."""

    path: Path                                  # the TOML file this was read from
    servers: tuple[ServerConfig, ...]
    clients: tuple[ClientConfig, ...]
    tls_dir: Path                               # pinned certificates and this host's own key
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_frame_bytes: int = 1 << 30              # largest array one frame may carry (1 GiB)
    log_level: str = "INFO"
    memory_budget: int = 2 << 30                # working memory per server for one job

    # -- look-ups --------------------------------------------------------------------------
    @property
    def leader(self) -> ServerConfig:
        """The coordinating server: the first one listed."""
        return self.servers[0]

    def server(self, name: str) -> ServerConfig:
        for s in self.servers:
            if s.name == name:
                return s
        raise ConfigError(f"{self.path}: no server named {name!r}; servers are "
                          f"{', '.join(s.name for s in self.servers)}")

    def party(self, name: str) -> int:
        """The party number of server ``name``."""
        return [s.name for s in self.servers].index(self.server(name).name)

    def client(self, name: str) -> ClientConfig:
        for c in self.clients:
            if c.name == name:
                return c
        raise ConfigError(f"{self.path}: no client named {name!r}; clients are "
                          f"{', '.join(c.name for c in self.clients) or '(none)'}")

    def is_server(self, name: str) -> bool:
        return any(s.name == name for s in self.servers)

    def is_client(self, name: str) -> bool:
        return any(c.name == name for c in self.clients)

    def identity(self, name: str) -> tuple[Path, Path]:
        """Certificate and key of a server or client called ``name``."""
        if self.is_server(name):
            s = self.server(name)
            return s.cert, s.key
        c = self.client(name)
        return c.cert, c.key

    def pins(self, name: str) -> tuple[str, ...]:
        """The fingerprints of the keys ``name`` may present; none for a name not listed."""
        if self.is_server(name):
            return self.server(name).pins
        return self.client(name).pins if self.is_client(name) else ()

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.servers] + [c.name for c in self.clients]


# -- loading -------------------------------------------------------------------------------
def load(path: str | Path) -> Deployment:
    """Read and check a deployment file; every problem is a ``ConfigError`` naming the file."""
    path = Path(path).resolve()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path} not found; pass --config with the "
                          "deployment's TOML file (e.g. deploy/local.toml)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc}") from None
    return parse(raw, path)


def parse(raw: dict[str, Any], path: Path) -> Deployment:
    """Build a ``Deployment`` from the parsed TOML of the file at ``path``."""
    base = path.parent

    def where(section: str) -> str:
        return f"{path}: [{section}]"

    def resolve(value: Any, section: str, key: str) -> Path:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where(section)} {key} must be a non-empty path string")
        p = Path(value)
        return p if p.is_absolute() else (base / p).resolve()

    known_top = {"deployment", "tls", "servers", "clients"}
    unknown = set(raw) - known_top
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {sorted(unknown)}; known: "
                          f"{sorted(known_top)}")

    dep = raw.get("deployment", {})
    _check_keys(dep, {"connect_timeout", "handshake_timeout", "round_timeout", "request_timeout",
                      "probe_timeout", "max_frame_bytes", "log_level", "memory_budget"},
                where("deployment"))
    defaults = Timeouts()
    timeouts = Timeouts(
        connect=_positive(dep, "connect_timeout", defaults.connect, where("deployment")),
        handshake=_positive(dep, "handshake_timeout", defaults.handshake, where("deployment")),
        round=_positive(dep, "round_timeout", defaults.round, where("deployment")),
        request=_positive(dep, "request_timeout", defaults.request, where("deployment")),
        probe=_positive(dep, "probe_timeout", defaults.probe, where("deployment")),
    )
    max_frame = dep.get("max_frame_bytes", 1 << 30)
    if not isinstance(max_frame, int) or max_frame < 1024:
        raise ConfigError(f"{where('deployment')} max_frame_bytes must be an integer >= 1024")
    log_level = str(dep.get("log_level", "INFO")).upper()
    memory_budget = parse_size(dep.get("memory_budget", "2 GiB"), where("deployment"))

    tls = raw.get("tls", {})
    if isinstance(tls, dict) and "ca" in tls:
        raise ConfigError(f"{where('tls')} ca: a deployment trusts no certificate authority; "
                          "it pins every server's and client's key instead (remove `ca`, run "
                          "`mpc-certs pin`; docs/operations.md)")
    _check_keys(tls, {"dir"}, where("tls"))
    tls_dir = resolve(tls.get("dir", "certs"), "tls", "dir")

    def cert_key(entry: dict[str, Any], section: str, name: str) -> tuple[Path, Path]:
        cert = resolve(entry["cert"], section, "cert") if "cert" in entry \
            else tls_dir / f"{name}.pem"
        key = resolve(entry["key"], section, "key") if "key" in entry else tls_dir / f"{name}.key"
        return cert, key

    servers_raw = raw.get("servers")
    if not isinstance(servers_raw, list) or len(servers_raw) not in (3, 4):
        raise ConfigError(f"{path}: [[servers]] must list 3 or 4 servers (in party order); "
                          f"found {len(servers_raw) if isinstance(servers_raw, list) else 0}")
    servers = []
    for i, s in enumerate(servers_raw):
        sec = f"servers #{i + 1}"
        _check_keys(s, {"name", "host", "port", "data_dir", "cert", "key", "listen", "pin"},
                    where(sec))
        name = _name(s, where(sec))
        host = s.get("host")
        if not isinstance(host, str) or not host:
            raise ConfigError(f"{where(sec)} host must be a host name or address")
        port = s.get("port")
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"{where(sec)} port must be an integer in 1..65535")
        cert, key = cert_key(s, sec, name)
        data_dir = resolve(s.get("data_dir", f"data/{name}"), sec, "data_dir")
        listen = s.get("listen", "")
        if not isinstance(listen, str):
            raise ConfigError(f"{where(sec)} listen must be an address string")
        servers.append(ServerConfig(name, host, port, data_dir, cert, key, listen,
                                    _pins(s, where(sec))))

    clients = []
    for i, c in enumerate(raw.get("clients", [])):
        sec = f"clients #{i + 1}"
        _check_keys(c, {"name", "role", "datasets", "cert", "key", "pin"}, where(sec))
        name = _name(c, where(sec))
        role = c.get("role")
        if role not in ROLES:
            raise ConfigError(f"{where(sec)} client {name!r}: role must be one of {ROLES}, "
                              f"got {role!r}")
        datasets = c.get("datasets", ["*"])
        if not isinstance(datasets, list) or not all(isinstance(d, str) for d in datasets):
            raise ConfigError(f"{where(sec)} datasets must be a list of names (or [\"*\"])")
        cert, key = cert_key(c, sec, name)
        clients.append(ClientConfig(name, role, cert, key, tuple(datasets), _pins(c, where(sec))))

    names = [s.name for s in servers] + [c.name for c in clients]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{path}: names must be unique across servers and clients (they are "
                          f"the certificates' names); repeated: {', '.join(dupes)}")
    owners: dict[str, str] = {}
    named = [(s.name, s.pins) for s in servers] + [(c.name, c.pins) for c in clients]
    for name, pins in named:
        for pin in pins:
            if owners.setdefault(pin, name) != name:
                raise ConfigError(f"{path}: the key {pin} is pinned for {owners[pin]} and for "
                                  f"{name}; one key stands for one name (each party makes its "
                                  "own: mpc-certs keygen)")
    addrs = [(s.host, s.port) for s in servers]
    if len(set(addrs)) != len(addrs):
        raise ConfigError(f"{path}: two servers share one host:port")
    dirs = [s.data_dir for s in servers]
    if len(set(dirs)) != len(dirs):
        raise ConfigError(f"{path}: two servers share one data_dir; give each its own")
    return Deployment(path, tuple(servers), tuple(clients), tls_dir, timeouts, max_frame,
                      log_level, memory_budget)


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 1 << 10, "mib": 1 << 20,
          "gib": 1 << 30}


def parse_size(value: Any, where: str) -> int:
    """Bytes from an integer or a string such as "2 GiB" or "1500 MB" (at least 64 MiB: less
    cannot hold a job's fixed costs)."""
    text = str(value).strip().lower().replace(" ", "")
    digits = text.rstrip("kmgib")
    unit = text[len(digits):]
    try:
        size = int(float(digits) * _UNITS[unit])
    except (KeyError, ValueError, OverflowError):
        raise ConfigError(f"{where} memory_budget must be a size such as \"2 GiB\" or "
                          f"\"1500 MB\", got {value!r}") from None
    if size < 64 << 20:
        raise ConfigError(f"{where} memory_budget must be at least 64 MiB, got {value!r}")
    return size


def _check_keys(table: Any, allowed: set[str], where: str) -> None:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = set(table) - allowed
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(allowed)}")


def _positive(table: dict[str, Any], key: str, default: float, where: str) -> float:
    value = table.get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{where} {key} must be a positive number of seconds")
    return float(value)


def _name(entry: dict[str, Any], where: str) -> str:
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ConfigError(f"{where} name must be 1-64 letters, digits, '_', '.', '-' "
                          f"(it is the certificate's name); got {name!r}")
    return name


def _pins(entry: dict[str, Any], where: str) -> tuple[str, ...]:
    """``pin``: one fingerprint or a list of up to ``MAX_PINS`` (a key change); none means
    the name is listed but nobody is admitted under it yet."""
    value = entry.get("pin", [])
    pins = [value] if isinstance(value, str) else value
    if not isinstance(pins, list) or not 0 <= len(pins) <= MAX_PINS or not all(
            isinstance(p, str) and PIN_RE.fullmatch(p) for p in pins):
        raise ConfigError(f"{where} pin must be a key fingerprint \"sha256:<64 hex digits>\" "
                          f"(mpc-certs keygen prints it) or a list of up to {MAX_PINS}; got "
                          f"{value!r}")
    return tuple(dict.fromkeys(pins))


def check_name(kind: str, name: str) -> str:
    """A dataset, result, upload or job name, safe to use as a file or folder name (no path
    separator, no leading dot, no newline; else ``InputError``)."""
    from mpcnet.errors import InputError
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InputError(f"{kind} name {name!r} is not allowed: use 1-64 letters, digits, "
                         "'_', '.', '-', starting with a letter or digit")
    return name
