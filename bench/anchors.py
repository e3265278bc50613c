"""Benchmarks: the reference figures our runtimes are read against, and the targets.

The paper's Table II (active 3PC in MP-SPDZ on three co-located Azure F32s v2 VMs; the paper's
other runtime figures did not survive in our copy) and MP-SPDZ measured on the development
machine (docs/design.md, section 5).
"""

from __future__ import annotations

# Table II of the paper (active 3PC, MP-SPDZ, three co-located Azure F32s v2 VMs), seconds:
# Protocol 1 (pi_FILTER-FS, all of it), its line 9 (D' = D x T) alone, and Protocol 2
# (pi_MS-GINI) per feature. The whole pi_GINI-FS is Prot 1 + p * Prot 2.
PAPER_TABLE_II = {"cogload": (27.0, 23.0, 1.13), "lsvt": (152.0, 53.0, 0.33),
                  "speeddating": (1837.0, 1812.0, 14.73)}
# MP-SPDZ (C++) on this same 2-core machine, all parties on loopback (docs/design.md, section 5):
# best settings with all features batched, and (SPEED only) the paper's own program.
MPSPDZ_BEST = {"speeddating": {"passive3": 3.7, "active3": 19.9, "active4": 12.0},
               "lsvt": {"passive3": 1.7, "active3": 4.2, "active4": 6.1},
               "cogload": {"passive3": 0.39, "active3": 1.4, "active4": 1.1}}
MPSPDZ_PAPER_PROGRAM = {"speeddating": {"passive3": 15.3, "active3": 176.0, "active4": 59.8}}
# Targets set for the product (end-to-end selection; sharing the SpeedDating CSV).
TARGETS = {("speeddating", "passive3"): 3.7, ("lsvt", "passive3"): 1.0,
           ("speeddating", "active3"): 20.0, ("lsvt", "active3"): 4.0,
           ("speeddating", "active4"): 12.0, ("lsvt", "active4"): 3.0}
SHARE_TARGETS = {"speeddating": 5.0}


def paper_total(shape: str, p: int) -> float | None:
    t = PAPER_TABLE_II.get(shape)
    return None if t is None else t[0] + p * t[2]
