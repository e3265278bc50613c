"""mpcnet: private feature selection over networked MPC servers.

Modules in dependency order (each imports only from those above it):

- ``ring``, ``fixedpoint``, ``prf``: arithmetic on numpy arrays, encoding, correlated randomness.
- ``plain``: plaintext reference of every score and of the selection.
- ``net``: channels (in-process loopback, TLS), the round engine and its metrics.
- ``schemes``: rep3 (passive 3PC) and the active schemes, behind one interface.
- ``ops``: comparison, equality, top-k, division, truncation, built on the scheme interface.
- ``featsel``: pi_MS-GINI, pi_FILTER-FS and pi_GINI-FS (Li, Dowsley, De Cock 2021).
"""

__version__ = "0.1.0"
