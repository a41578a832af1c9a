"""The figures of the default run that the pages quote are rendered from the metrics: exact text from known metrics,
a stage that has not run said so, and a hand-edited figure put back by `pond docs` (so ``pond docs --check`` fails on
it: tests/unit/test_reference.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from pond.evaluation import results_pages as rp
from pond.evaluation.monitor_report import monitor_verdict
from tests.conftest import ROOT


def _metrics() -> dict:
    return {p.stem: json.loads(p.read_text()) for p in (ROOT / "metrics").glob("*.json")}


def test_a_stage_that_has_not_run_is_said_not_guessed():
    assert rp.li_figures({}) == "Not run: metrics/train_li.json missing."
    assert rp.budget_figures({"optimize": {}}) == "Not run: metrics/evaluate.json, metrics/backtest.json missing."


def test_known_metrics_give_known_text():
    li = {"r1.82_pdm5": {"selection.method": "random_forest", "selection.heldout_li.selected": 45.63,
                         "selection.best_rule": "dram_bound", "selection.margin_over_best_rule": 0.51,
                         **{f"{r}.li_at_fp{fp}": 10.0 * fp for r in ("random_forest", "dram_bound", "memory_bound",
                                                                    "l3_miss_latency") for fp in (1, 2, 5)},
                         "selection.heldout_li.random_forest": 46.84}}
    text = rp.li_figures({"train_li": li})
    assert text.startswith("At 182% latency, PDM 5%: selected `random_forest`, 45.6% on outer held-out halves "
                           "(best single-counter rule `dram_bound`, margin +0.51 points).")
    assert "| `random_forest` | 10.0% | 20.0% | 50.0% | 46.8% |" in text
    um = rp.um_figures({"train_um": {"gbm.um_at_op4": 0.32887, "static.um_at_op4": 0.10019, "gbm.op_at_um10": 0.00215}})
    assert "| untouched memory on zNUMA at 4% overpredicted VMs | 32.9% | 10.0% |" in um
    assert "| overpredicted VMs at 10% untouched memory | 0.21% | -% |" not in um     # a missing figure is "-"
    assert "| overpredicted VMs at 10% untouched memory | 0.21% | - |" in um
    sim = {"simulate": {"headline_pool_sockets": 16, "policies": {"um_only_r1.82": {
        "at_headline": {"savings": -0.01521, "savings_interval": [-0.08312, 0.06012]}, "recommended_pool_sockets": 0,
        "recommended": {"savings": 0.0}}}, "answer": {"1.82": {"decided": False, "policy": "combined_r1.82",
                                                                "pool_sockets": 64, "savings": 0.0316,
                                                                "savings_interval": [-0.07993, 0.16504],
                                                                "undecided_between": ["um_only_r1.82",
                                                                                      "combined_r1.82"],
                                                                "difference_interval": [-0.06469, 0.08496]}}}}
    text = rp.dram_figures(sim)
    assert "| `um_only` (1.82) | -1.5% [-8.3, +6.0] | - | no pool | 0.0% | - |" in text
    assert ("- Sizing answer at 182%: `combined` on 64-socket pools, 3.2% [-8.0, +16.5] DRAM saved (undecided "
            "between `um_only` and `combined`; difference with the runner-up [-6.5, +8.5]).") in text
    sim["simulate"]["answer"]["1.82"] |= {"difference_interval": [0.0129, 0.0526], "placement_reach": 0.028}
    assert ("- Sizing answer at 182%: `combined` on 64-socket pools, 3.2% [-8.0, +16.5] DRAM saved (undecided "
            "between `um_only` and `combined`; difference with the runner-up [+1.3, +5.3], the replay's own reach 2.8 "
            "points).") in rp.dram_figures(sim)


def test_a_hand_edited_figure_is_rendered_back(tmp_path):
    pages = [rp.README, rp.TONIGHT, rp.MONITOR, *(rp.RESULTS / f"{name}.md" for name in rp.PAGES)]
    for page in [*pages, rp.SAVINGS]:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    edits = {rp.RESULTS / "budget.md": ("| `combined` | ", "| `combined` | 99.9% (edited) "),
             rp.RESULTS / "dram.md": ("| 50% of every VM on the pool | ", "| 50% of every VM on the pool | 1.0% | "),
             rp.MONITOR: ("- **The LI model on the same counters**: ", "- **The LI model on the same counters**: 5%, ")}
    for page, (old, new) in edits.items():
        committed = (tmp_path / page).read_text()
        assert old in committed
        (tmp_path / page).write_text(committed.replace(old, new, 1))
    out = rp.rendered_pages(tmp_path, _metrics())
    assert all(out[page] == (ROOT / page).read_text() for page in pages)


def test_the_premium_is_what_the_two_savings_imply():
    """(1 - provider) = (1 - own peaks) (1 + premium) / (1 + all local's premium): a split that saves the same in
    both accountings pays all local's premium; one that saves more as a provider buys pays less."""
    assert rp.premium((3.0, 3.0), 0.16) == pytest.approx(0.16)
    assert rp.premium((9.763, 3.601), 0.16354) == pytest.approx(0.08917, abs=1e-5)
    assert rp.premium((10.0, 0.0), 0.0) == pytest.approx(-0.10)


def test_static_figures_from_the_savings_plot(tmp_path):
    plot = tmp_path / "savings.csv"
    plot.write_text("policy,pool_sockets,savings_pct,per_server_peaks_pct\n"
                    "combined_r1.82,2,-22.0,-6.0\n"
                    "static_10pct,2,0.5,0.8\nstatic_10pct,16,2.0,1.0\nstatic_10pct,64,3.0,1.0\n"
                    "static_50pct,2,0.1,0.9\nstatic_50pct,16,5.5,2.7\nstatic_50pct,64,9.8,3.6\n")
    static = rp.read_static_savings(plot)
    assert static == {10: {2: (0.5, 0.8), 16: (2.0, 1.0), 64: (3.0, 1.0)},
                      50: {2: (0.1, 0.9), 16: (5.5, 2.7), 64: (9.8, 3.6)}}
    m = {"simulate": {"all_local_uniform_premium": 0.16, "headline_pool_sockets": 16, "servers": 330, "clusters": 12}}
    text = rp.premium_figures(m, static)
    assert "| premium over the peaks, by pool size (sockets) | 2 | 16 | 64 |" in text
    assert "| 50%: saved as a provider buys | +0.1% | +5.5% | +9.8% |" in text
    assert "At 64 sockets, 50% of every VM on the pool saves +6.2 points more as a provider buys" in text
    opened = rp.static_open_figures(m, static)
    assert ("(10/50% of every VM) save +0.5, +0.1% as a provider buys and +0.8, +0.9% at each server's own "
            "peak") in opened
    assert "runs +2.8 to +6.2 points above the per-server peaks at 16-64 sockets (not within 3)" in opened
    assert ("- As a provider buys, each fixed split saves more as the pool grows (smallest step +1.00 points), and "
            "more with a larger share at every pool size above the smallest.") in opened
    assert ("- At each server's own peak, no fixed split's saving falls as the pool grows (flat at a step or more), "
            "and more with a larger share") in opened
    falls = {10: {2: (0.0, 0.0), 16: (1.0, 1.0), 64: (0.5, 1.2)}, 50: {2: (0.0, 0.0), 16: (0.8, 2.0), 64: (3.0, 3.0)}}
    assert ("- As a provider buys, a fixed split's saving falls by up to 0.5 points as the pool grows, and not "
            "always more with a larger share (at 16 sockets).") in rp.static_open_figures(m, falls)
    assert "On the trace's servers" not in opened and "Pond's accounting" not in opened   # an older plot: no column
    plot.write_text("policy,pool_sockets,savings_pct,per_server_peaks_pct,kept_placement_pct\n"
                    "static_10pct,2,0.5,0.8,-0.6\nstatic_10pct,16,2.0,1.0,0.0\nstatic_10pct,64,3.0,1.0,0.3\n"
                    "static_50pct,2,0.1,0.9,-0.4\nstatic_50pct,16,5.5,2.7,1.9\nstatic_50pct,64,9.8,3.6,3.1\n")
    kept = rp.read_static_savings(plot)
    assert kept[50][64] == (9.8, 3.6, 3.1) and rp.premium(kept[50][64], 0.16) == rp.premium(static[50][64], 0.16)
    pond = rp.static_open_figures(m, kept)
    assert ("- On the trace's servers (Pond's accounting: every VM kept where production's packing put it), the same "
            "splits save -0.6, -0.4% on 2-socket pools, and 50% saves +1.9% at 16 sockets and +3.1% at 64.") in pond
    assert ("- On the trace's servers, each fixed split saves more as the pool grows (smallest step +0.30 points), "
            "and more with a larger share at every pool size above the smallest.") in pond
    assert ("- As a provider buys, every split runs +2.0 to +6.7 points from Pond's accounting above the smallest "
            "pool (not within 3; farthest: 50% at 64 sockets).") in pond
    assert "search's own noise" not in rp.static_open_figures(m, kept)      # a replay that does not search
    assert ("- The sizing search's own noise: a scan of every whole GB finds all local 1.35% less DRAM than the "
            "search") in rp.static_open_figures({"simulate": m["simulate"] | {"all_local_search_gap": 0.0135}}, kept)
    scanned = rp.static_open_figures({"simulate": m["simulate"] | {"search": "scan"}}, kept)
    assert "search's own noise" not in scanned
    assert "- The sizing search scans every whole GB up from what the VMs need at their peak" in scanned
    assert "- Clusters are the draw's own: 330 servers in 12 clusters." in scanned       # metrics before the scale
    scale = {"servers_min": 17, "servers_median": 21.5, "servers_max": 53, "largest_pool_servers": 32,
             "clusters_holding_largest_pool": 3, "vms_created_per_cluster_day_median": 289.4}
    assert ("- Clusters are the draw's own: 330 servers in 12 clusters of 17-53 servers (median 21.5); 3 of them hold "
            "a whole pool of the largest size replayed (32 servers), and a cluster creates about 289 VMs a day "
            "(median), where Pond's create thousands.") in rp.static_open_figures(
                {"simulate": m["simulate"] | {"cluster_scale": scale}}, kept)
    assert rp.premium_figures(m, {}) == f"Not run: {rp.SAVINGS} missing."
    assert rp.read_static_savings(tmp_path / "absent.csv") == {}


def test_the_monitor_verdict_follows_the_metrics():
    def ratio(recall: float, false_alarm: float) -> dict:
        f = {"recall": recall, "false_alarm": false_alarm}
        return {"monitor": f, "li_model": f, "l3_miss_latency": f, "slowdown_estimate": {}}
    m = {"trained": True, "max_false_alarm": 0.05, "1.82": ratio(0.9, 0.04), "2.22": ratio(0.8, 0.04)}
    assert "**The monitor's model meets the lab target at x1.82**" in monitor_verdict(m)
    m["2.22"] = ratio(0.9, 0.049)
    assert "**The monitor's model meets the lab target at every ratio**" in monitor_verdict(m)
    m["1.82"] = ratio(0.95, 0.06)
    assert "meets the lab target at x2.22**" in monitor_verdict(m)
    assert monitor_verdict({"trained": False, "reason": "no spill runs"}) == "No monitor model: no spill runs."


def test_the_monitor_table_shows_the_called_workloads_at_both_thresholds_where_the_metrics_have_them():
    from pond.evaluation.monitor_report import monitor_table

    f = {"recall": 0.9, "false_alarm": 0.04, "recall_at_max_false_alarm": 0.95}
    at = {"runs_exceeding": 10, "runs_within": 90, "monitor": f, "li_model": f, "l3_miss_latency": f}
    m = {"trained": True, "max_false_alarm": 0.05, "1.82": at}
    assert "the called workloads" not in monitor_table(m)
    m["1.82"] = at | {"calls": {"runs_exceeding": 4, "runs_within": 221,
                                "spill_threshold": {"recall": 0.25, "false_alarm": 0.0136},
                                "whole_pool_threshold": {"recall": 1.0, "false_alarm": 0.0362}}}
    assert "| x1.82 | 4 | 221 | 25.0%, 1.4% | 100.0%, 3.6% |" in monitor_table(m)
