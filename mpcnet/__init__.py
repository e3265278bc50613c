"""mpcnet: private feature selection over networked MPC servers.

Modules in dependency order (each imports only from those above it):

- ``ring``, ``fixedpoint``, ``prf``: arithmetic on numpy arrays, encoding, correlated randomness.
- ``plain``: plaintext reference of every score and of the selection.
- ``net``: channels (in-process loopback, TLS), the round engine and its metrics.
- ``schemes``: rep3 (passive 3PC) and the active schemes, behind one interface.
- ``ops``: comparison, equality, top-k, division, truncation, built on the scheme interface.
- ``featsel``, ``train``: pi_MS-GINI, pi_FILTER-FS and pi_GINI-FS (Li, Dowsley, De Cock 2021);
  private logistic regression on the selection's result.
- ``certs``, ``parties``, ``client``: the certificate tool, the server process, the owners' and
  analysts' CLI and Python API (the clone's top-level folders, installed under this package:
  docs/design.md, section 2); ``data``: the bundled datasets.
"""

from importlib import metadata as _metadata

try:  # the version is written once, in pyproject.toml, and read from the installed metadata
    __version__ = _metadata.version("mpcnet")
except _metadata.PackageNotFoundError:  # a clone on sys.path without an install
    __version__ = "0+unknown"
