"""Smoke runs of the runtime benchmarks (bench/network.py, bench/scaling.py and the modules
they share: measure, report, anchors), so they cannot rot.

The networked benchmark runs once on a 40 x 8 synthetic dataset under every setting with real
mpc-party processes over TLS on 127.0.0.1 (every process stopped by PID), and the report must
carry every phase and figure. The scaling benchmark runs three tiny in-process points. About
20 s in all. The emulated-network run needs root and creates a network namespace: marked slow.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from bench import anchors, measure, netemu, network, scaling  # noqa: E402
from mpcnet.schemes import registry  # noqa: E402

FIGURES = ("e2e_s", "job_s", "share_cli_s", "share_client_s")


def _check_summary(s: dict, n_parties: int) -> None:
    for key in FIGURES:
        assert s[key]["median"] > 0, key
        assert s[key]["min"] <= s[key]["median"] <= s[key]["max"], key
    assert s["rounds"] > 0
    assert len(s["sent"]) == n_parties and all(v > 0 for v in s["sent"].values())
    assert len(s["peak"]) == n_parties and all(v > 10e6 for v in s["peak"].values())
    for phase in measure.PHASES:
        assert phase in s["phases"], f"phase {phase} missing for {s['security']}"
        assert s["phases"][phase]["seconds"]["median"] >= 0
    assert s["phases"]["scoring"]["rounds"] > 0 and s["phases"]["selection"]["rounds"] > 0
    assert s["equal"] is True, "D' differs from the plaintext selection"


def test_smoke_report_has_every_phase_and_figure(tmp_path: Path) -> None:
    out = tmp_path / "network.md"
    code = network.main(["--synthetic", "40x8x3", "--security", "passive3", "active3",
                         "active4", "--repeat", "1", "--out", str(out),
                         "--workdir", str(tmp_path / "work")])
    assert code == 0
    raw = json.loads(out.with_suffix(".json").read_text())
    by_setting = {s["security"]: s for s in raw["summaries"]}
    for setting in measure.SETTINGS:
        _check_summary(by_setting[setting], registry.get(setting).n_parties)
    text = out.read_text(encoding="utf-8")
    for section in ("## End to end", "## Per phase", "## Against the paper and MP-SPDZ",
                    "## Per server", "## Noise"):
        assert section in text, section
    for setting in measure.SETTINGS:
        rows = [ln for ln in text.splitlines() if ln.startswith(f"| synthetic-40x8 | {setting} |")]
        phases = {ln.split("|")[3].strip() for ln in rows}
        assert set(measure.PHASES) <= phases, f"{setting}: phases {phases}"


def test_each_score_gets_its_rows_and_is_checked_against_its_reference(tmp_path: Path) -> None:
    out = tmp_path / "scores.md"
    code = network.main(["--synthetic", "40x8x3", "--security", "passive3", "--scores", "mi",
                         "pcc", "--repeat", "1", "--out", str(out),
                         "--workdir", str(tmp_path / "work")])
    assert code == 0
    raw = json.loads(out.with_suffix(".json").read_text())
    assert [(s["score"], s["equal"]) for s in raw["summaries"]] == [("mi", True), ("pcc", True)]
    text = out.read_text(encoding="utf-8")
    for score in ("mi", "pcc"):
        assert f"| synthetic-40x8 ({score}) | 40 × 8 | 3 | passive3 |" in text


def test_paper_totals_are_prot1_plus_p_times_prot2() -> None:
    assert anchors.paper_total("cogload", 120) == pytest.approx(27 + 120 * 1.13)
    assert anchors.paper_total("lsvt", 310) == pytest.approx(152 + 310 * 0.33)
    assert anchors.paper_total("speeddating", 122) == pytest.approx(1837 + 122 * 14.73)


def test_delay_proxy_adds_the_configured_delay(tmp_path: Path) -> None:
    base = netemu.probe_link(None, None, tmp_path, pings=10, bulk=1 << 20)
    slow = netemu.probe_link("proxy", netemu.Link("t", 5.0, None), tmp_path, pings=10,
                             bulk=1 << 20)
    assert base["rtt_ms"] < 5
    assert 10.0 <= slow["rtt_ms"] < 30.0  # 5 ms each way, millisecond timers


def test_scaling_smoke_writes_table_and_plots(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib: pip install -e '.[bench]'")
    monkeypatch.setattr(scaling, "QUICK", {"m": [60], "p": [8], "k": [2]})
    monkeypatch.setattr(scaling, "FIXED", {"m": {"p": 6, "k": 3}, "p": {"m": 50, "k": 4},
                                           "k": {"m": 50, "p": 6}})
    out = tmp_path / "scaling.md"
    assert scaling.main(["--quick", "--security", "passive3", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    for sweep in ("m", "p", "k"):
        assert f"| {sweep} | passive3 |" in text
        assert (tmp_path / f"scaling_{sweep}.png").stat().st_size > 10_000


def _made_up(shape: str, security: str, rounds: int, job_s: float, link: str) -> dict:
    return {"shape": shape, "security": security, "score": "ms-gini", "available": True,
            "link": link, "rounds": rounds, "sent": {"alice": 50e6, "bob": 40e6},
            "job_s": {"median": job_s, "min": job_s, "max": job_s}}


def test_profiles_table_puts_every_link_side_by_side() -> None:
    """From recorded figures (no run): one row per case, a job time and a latency share per
    link, a transfer share for links with a rate; the shares are rounds x round trip / job
    time and bytes x 8 / rate / job time."""
    from bench import report

    links = [netemu.PROXY_BASELINE, *(netemu.PROFILES[n] for n in netemu.DEFAULT_PROFILES)]
    rtts = {"proxy-0": 0.2, "lan": 2.5, "wan": 41.0, "wan100m": 41.0}
    em = {"profiles": [{"link": {"name": ln.name, "delay_ms": ln.delay_ms,
                                 "rate_bit": ln.rate_bit},
                        "probe": {"rtt_ms": rtts[ln.name], "echo_mb_s": 100.0},
                        "summaries": [_made_up("lsvt", "passive3", 50, 4.1, ln.name)]}
                       for ln in links]}
    em["profiles"][-1]["summaries"].append(_made_up("speeddating", "active3", 100, 8.0, "x"))
    sums = [_made_up("lsvt", "passive3", 50, 1.0, "loopback")]
    rows = report.profiles_table(sums, em)
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    assert head[:5] == ["shape", "setting", "rounds", "MB sent per server", "loopback job s"]
    for ln in links:
        assert f"{ln.name} job s" in head and f"{ln.name} latency share" in head
        assert (f"{ln.name} transfer share" in head) == bool(ln.rate_bit)
    body = [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]
    assert [r[:2] for r in body] == [["lsvt", "passive3"], ["speeddating", "active3"]]
    assert all(len(r) == len(head) for r in body)
    lsvt = dict(zip(head, body[0], strict=True))
    assert lsvt["rounds"] == "50" and lsvt["MB sent per server"] == "50.0"
    assert lsvt["loopback job s"] == "1.00" and lsvt["wan job s"] == "4.10"
    assert lsvt["wan latency share"] == f"{100 * 50 * 0.0205 / 4.1:.0f} %"  # one way
    assert lsvt["wan100m transfer share"] == f"{100 * 50e6 * 8 / 100e6 / 4.1:.0f} %"
    only_wan100m = dict(zip(head, body[1], strict=True))
    assert only_wan100m["loopback job s"] == "–" and only_wan100m["wan job s"] == "–"
    assert only_wan100m["wan100m job s"] == "8.00"


@pytest.mark.slow
def test_emulated_network_smoke(tmp_path: Path) -> None:
    support = netemu.check_support()
    if not support.netns and not support.netem:
        pytest.skip(f"no network namespaces here: {support.reason}")
    out = tmp_path / "network.md"
    assert network.main(["--synthetic", "40x8x3", "--security", "passive3", "--repeat", "1",
                         "--netem", "--out", str(out)]) == 0
    raw = json.loads(out.with_suffix(".json").read_text())
    links = [p["link"]["name"] for p in raw["emulated"]["profiles"]]
    assert set(netemu.DEFAULT_PROFILES) <= set(links)
    text = out.read_text(encoding="utf-8")
    assert "## Emulated network" in text
    from bench import report
    table = report.profiles_table(raw["summaries"], raw["emulated"])
    assert len(table) == 3 and table[2] in text  # one case: one row, every link's figures
    assert table[2].count("%") == 2 * len(links) - 1  # a latency share each, transfer: 3 rated


def test_large_report_and_growth(tmp_path: Path) -> None:
    """bench.large's report, exponents and plots from made-up points (its runs use the same
    run_case as above): a linear sweep has exponent 1, a skipped point is listed."""
    from bench import large

    points = [{"sweep": "m", "security": "passive3", "m": m, "p": 100, "k": 10,
               "share_cli_s": 1.0, "job_s": m / 1e4, "rounds": 50, "sent_per_server": m * 640,
               "peak_per_server": 1.6e9, "equal": True, "plan": None} for m in (10**4, 10**5)]
    points.append({"sweep": "m", "security": "passive3", "m": 10**6, "p": 100, "k": 10,
                   "skipped": "skipped: about 100 s estimated"})
    assert large.growth(points, "job_s", "m") == "1.00"
    assert large.growth(points, "peak_per_server", "m") == "0.00"
    result = {"command": "python -m bench.large", "wall_s": 1.0, "date": "d", "machine": "x",
              "load_start": 0.0, "load_end": 0.0, "securities": ["passive3"], "points": points,
              "budget": "2 GiB", "plots": large.plot({"points": points,
                                                      "securities": ["passive3"]}, tmp_path)}
    text = large.render(result)
    assert "| m | passive3 | loopback | 1,000,000 | 100 | 10 | skipped: about 100 s" in text
    assert "| m | passive3 | 1.00 | 1.00 | 0.00 |" in text
    assert (tmp_path / "large_m.png").stat().st_size > 1000


def test_large_one_block_and_wan_rows() -> None:
    """bench.large's first block as a job of its own (from the plan's public figures), and a
    point's rounds against it, its WAN row's latency share, its peak per server."""
    from bench import large

    one = {"blocks": 1, "tiles": 1, "row_blocks": 1, "block_columns": 100, "tile_rows": 10**4}
    columns = {"blocks": 17, "tiles": 1, "row_blocks": 5, "block_columns": 6,
               "tile_rows": 10**6}
    tiles = {"blocks": 100, "tiles": 3, "row_blocks": 9, "block_columns": 1,
             "tile_rows": 333_334}
    assert large.first_block(10**4, 100, 10, one) is None
    assert large.first_block(10**6, 100, 10, columns) == (10**6, 6, 6)
    assert large.first_block(10**6, 100, 10, tiles) == (333_334, 1, 1)
    point = {"sweep": "m", "security": "passive3", "m": 10**6, "p": 100, "k": 10,
             "share_cli_s": 80.0, "job_s": 100.0, "cpu_s": 150.0, "rounds": 300,
             "sent_per_server": 6e9, "peak": {"alice": 1.6e9, "bob": 1.7e9, "carol": 3e9},
             "peak_per_server": 3e9, "equal": True, "loadavg": 4.0,
             "plan": dict(columns, method="ranking", comparisons=4950, levels=5),
             "one_block": {"m": 10**6, "p": 6, "k": 6, "rounds": 60}}
    wan = dict(point, link="wan", rtt_ms=41.0, job_s=150.0)
    wan.pop("one_block")
    result = {"command": "c", "wall_s": 1.0, "date": "d", "machine": "x", "load_start": 0.0,
              "load_end": 0.0, "securities": ["passive3"], "points": [point, wan],
              "budget": "2 GiB", "budget_bytes": 2 << 30}
    text = large.render(result).splitlines()
    rows = [ln for ln in text if ln.startswith("| m | passive3 |")]
    head = [c.strip() for c in next(ln for ln in text if ln.startswith("| sweep | setting | link"))
            .strip("|").split("|")]
    cells = [dict(zip(head, (c.strip() for c in r.strip("|").split("|")), strict=True))
             for r in rows[:2]]
    assert cells[0]["link"] == "loopback" and cells[1]["link"] == "wan"
    assert cells[0]["one block's rounds"] == "60 (1,000,000 x 6, k = 6)"
    assert cells[0]["rounds ÷ one block's"] == "5.0"
    assert cells[0]["peak GB per server"] == "1.60 / 1.70 / 3.00"
    assert cells[0]["peak within budget"] == "**NO**"  # 3 GB > 2 GiB
    assert cells[1]["latency share"] == f"{100 * 300 * 0.0205 / 150:.0f} %"
    assert cells[0]["latency share"] == "–"


def test_planner_unit_costs_are_measured() -> None:
    from bench import planner

    costs = planner.unit_costs("passive3")
    assert all(0 < v < 1 for v in costs.values()), costs


def test_sharefiles_bench_reads_every_width(tmp_path: Path) -> None:
    from bench import sharefiles

    out = tmp_path / "sharefiles.md"
    sharefiles.main(["--rows", "40", "--columns", "5", "--components", "2", "3", "--widths",
                     "1", "5", "--repeat", "1", "--out", str(out)])
    results = json.loads(out.with_suffix(".json").read_text())["results"]
    assert [(r["components"], r["width"]) for r in results] == [(2, 1), (2, 5), (3, 1), (3, 5)]
    assert "| 3 | 5 |" in out.read_text()
