"""The cluster bootstrap behind every DRAM-saved figure (``simulator.intervals``), and the sizing answer it decides:
a policy is named only when it beats the runner-up beyond their paired interval (docs/tonight.md, "Which policy the
service applies")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.simulator.intervals import Savings, cluster_draws, percentiles, with_intervals
from pond.simulator.sizing_report import answer, with_served_reach


def _table(gb: dict[str, list[float]]) -> pd.DataFrame:
    """Per-cluster required GB (and the same as per-server peaks) for all local and each policy at 16 sockets."""
    rows = []
    for name, values in gb.items():
        for c, v in enumerate(values):
            rows.append({"policy": name, "pool_sockets": 0 if name == "all_local" else 16, "cluster": c,
                         "required_gb": v, "peak_required_gb": v})
    return pd.DataFrame(rows)


def test_draws_take_every_cluster_count_with_replacement_and_are_seeded():
    w = cluster_draws(5, 1000, 42)
    assert w.shape == (1000, 5) and (w.sum(axis=1) == 5).all()
    assert np.array_equal(w, cluster_draws(5, 1000, 42)) and not np.array_equal(w, cluster_draws(5, 1000, 43))
    assert (w == 0).any() and (w >= 2).any()          # with replacement: some clusters out, some twice


def test_a_saving_the_same_on_every_cluster_has_a_zero_width_interval():
    t = _table({"all_local": [100, 200, 300, 400], "half": [90, 180, 270, 360]})
    s = Savings(t, "required_gb", cluster_draws(4, 500, 1), 0.9)
    assert s.interval("half", 16) == (pytest.approx(0.1), pytest.approx(0.1))
    assert s.interval("all_local", 0) == (0.0, 0.0)


def test_an_interval_spans_what_the_clusters_disagree_on():
    t = _table({"all_local": [100] * 10, "p": [80, 80, 80, 80, 80, 100, 100, 100, 100, 100]})
    s = Savings(t, "required_gb", cluster_draws(10, 4000, 7), 0.9)
    lo, hi = s.interval("p", 16)
    assert lo < 0.1 < hi and 0.0 <= lo and hi <= 0.2
    # percentiles of a known sample: the central 90% of 0..100 is 5..95
    assert percentiles(np.arange(101.0), 0.9) == (5.0, 95.0)


def _policies(savings: dict[str, float]) -> dict:
    return {name: {"recommended_pool_sockets": 16, "recommended": {"savings": v},
                   "realized_mispredictions": {"1.82": 0.01}, "realized_unmitigated": {"1.82": 0.01}}
            for name, v in savings.items()}


def test_the_answer_names_a_policy_only_beyond_the_paired_interval():
    # a beats b on every cluster by 5 points: decided, however the clusters are drawn
    t = _table({"all_local": [100] * 6, "a_r1.82": [80] * 6, "combined_r1.82": [85] * 6})
    s = Savings(t, "required_gb", cluster_draws(6, 1000, 3), 0.9)
    got = answer(_policies({"a_r1.82": 0.2, "combined_r1.82": 0.15}), 0.02, s)["1.82"]
    assert got["policy"] == "a_r1.82" and got["decided"] and got["runner_up"] == "combined_r1.82"
    assert got["difference_interval"] == [pytest.approx(0.05), pytest.approx(0.05)]


def test_an_undecided_answer_says_so_and_falls_back_to_the_solver_s_policy():
    # a saves more on average, but on half the clusters less than combined: the paired interval spans 0
    t = _table({"all_local": [100] * 8, "a_r1.82": [70, 70, 70, 70, 95, 95, 95, 95],
                "combined_r1.82": [85] * 8, "combined_cap20pct_r1.82": [86] * 8})
    s = Savings(t, "required_gb", cluster_draws(8, 2000, 5), 0.9)
    got = answer(_policies({"a_r1.82": 0.175, "combined_r1.82": 0.15, "combined_cap20pct_r1.82": 0.14}), 0.02,
                 s)["1.82"]
    lo, hi = got["difference_interval"]
    assert lo < 0 < hi and not got["decided"]
    assert got["undecided_between"] == ["a_r1.82", "combined_r1.82"] and got["policy"] == "combined_r1.82"
    # the served fallback has no runner-up of its own: the pair compared is named once, with its pool sizes
    assert "runner_up" not in got and got["undecided_pool_sockets"] == [16, 16]
    # without draws the point estimate decides, as before
    assert answer(_policies({"a_r1.82": 0.175, "combined_r1.82": 0.15}), 0.02)["1.82"]["policy"] == "a_r1.82"


def test_a_verdict_within_the_replay_s_own_reach_is_undecided():
    # a beats combined by 5 points on every cluster, but leaving out 1% of the VMs moves their difference by 6
    t = _table({"all_local": [100] * 6, "a_r1.82": [80] * 6, "combined_r1.82": [85] * 6})
    s = Savings(t, "required_gb", cluster_draws(6, 1000, 3), 0.9)
    asked = []

    def reach(a: tuple[str, int], b: tuple[str, int]) -> float:
        asked.append((a, b))
        return moved

    moved = 0.06
    got = answer(_policies({"a_r1.82": 0.2, "combined_r1.82": 0.15}), 0.02, s, reach)["1.82"]
    assert asked == [(("a_r1.82", 16), ("combined_r1.82", 16))]
    assert not got["decided"] and got["placement_reach"] == 0.06 and got["policy"] == "combined_r1.82"
    assert got["undecided_between"] == ["a_r1.82", "combined_r1.82"] and "runner_up" not in got
    moved = 0.04                                             # within the interval's low end: decided, as before
    got = answer(_policies({"a_r1.82": 0.2, "combined_r1.82": 0.15}), 0.02, s, reach)["1.82"]
    assert got["decided"] and got["policy"] == "a_r1.82" and got["placement_reach"] == 0.04


def test_the_reach_is_asked_only_where_the_interval_over_clusters_decides():
    t = _table({"all_local": [100] * 8, "a_r1.82": [70, 70, 70, 70, 95, 95, 95, 95], "combined_r1.82": [85] * 8})
    s = Savings(t, "required_gb", cluster_draws(8, 2000, 5), 0.9)

    def reach(a: tuple[str, int], b: tuple[str, int]) -> float:
        raise AssertionError("an undecided pair costs no sizing")

    got = answer(_policies({"a_r1.82": 0.175, "combined_r1.82": 0.15}), 0.02, s, reach)["1.82"]
    assert not got["decided"] and "placement_reach" not in got


def _caps_trading_places() -> tuple[pd.DataFrame, dict]:
    """um_only saves most on half the clusters only (undecided); the 15% cap's point estimate beats the 30% cap's,
    but on half the clusters it saves less: noise between them."""
    t = _table({"all_local": [100] * 8, "um_only_r1.82": [70, 70, 70, 70, 95, 95, 95, 95],
                "combined_cap15pct_r1.82": [84, 84, 84, 84, 90, 90, 90, 90],
                "combined_cap30pct_r1.82": [88] * 8})
    return t, _policies({"um_only_r1.82": 0.175, "combined_cap15pct_r1.82": 0.13, "combined_cap30pct_r1.82": 0.12})


def test_an_undecided_answer_keeps_the_configured_cap_where_the_caps_trade_places_on_noise():
    t, policies = _caps_trading_places()
    s = Savings(t, "required_gb", cluster_draws(8, 2000, 5), 0.9)
    lo, hi = s.difference(("combined_cap15pct_r1.82", 16), ("combined_cap30pct_r1.82", 16))
    assert lo < 0 < hi                                               # the caps cannot be told apart
    got = answer(policies, 0.02, s, fallback_cap=0.3)["1.82"]
    assert not got["decided"] and got["undecided_between"] == ["um_only_r1.82", "combined_cap15pct_r1.82"]
    assert got["policy"] == "combined_cap30pct_r1.82" and got["savings"] == 0.12
    assert got["fallback"] == "30% cap kept: no cap beats it"
    # with no cap configured the point estimate picks, as before
    got = answer(policies, 0.02, s)["1.82"]
    assert got["policy"] == "combined_cap15pct_r1.82" and got["fallback"].startswith("point estimate")


def test_a_cap_that_beats_the_configured_one_beyond_interval_and_reach_replaces_it():
    t, policies = _caps_trading_places()
    t.loc[t.policy == "combined_cap15pct_r1.82", "required_gb"] = 84.0      # 4 points better on every cluster
    s = Savings(t, "required_gb", cluster_draws(8, 2000, 5), 0.9)
    got = answer(policies, 0.02, s, lambda a, b: 0.03, fallback_cap=0.3)["1.82"]
    assert got["policy"] == "combined_cap15pct_r1.82" and got["fallback"] == "beats the 30% cap by +4.00 points"
    # the replay's own reach larger than the margin: the configured cap stands
    got = answer(policies, 0.02, s, lambda a, b: 0.05, fallback_cap=0.3)["1.82"]
    assert got["policy"] == "combined_cap30pct_r1.82"


def test_a_configured_cap_over_the_budget_or_not_replayed_is_not_served():
    t, policies = _caps_trading_places()
    policies["combined_cap30pct_r1.82"]["realized_unmitigated"] = {"1.82": 0.03}       # budget 0.02
    s = Savings(t, "required_gb", cluster_draws(8, 2000, 5), 0.9)
    got = answer(policies, 0.02, s, fallback_cap=0.3)["1.82"]
    assert got["policy"] == "combined_cap15pct_r1.82"
    assert got["fallback"] == "point estimate: 30% cap not sized or over budget"
    # a cap the replay never sized (not in simulate.pool_caps) is not an error either: the point estimate picks
    del policies["combined_cap30pct_r1.82"]
    got = answer(policies, 0.02, s, fallback_cap=0.3)["1.82"]
    assert got["policy"] == "combined_cap15pct_r1.82" and got["fallback"].startswith("point estimate")


def test_a_configured_cap_that_buys_no_pool_and_is_not_beaten_serves_all_local():
    # the 15% cap pools a little, on half the clusters only; the 30% cap buys no pool at any size
    t = _table({"all_local": [100] * 8, "um_only_r1.82": [70, 70, 70, 70, 125, 125, 125, 125],
                "combined_cap15pct_r1.82": [98, 98, 98, 98, 101, 101, 101, 101]})
    s = Savings(t, "required_gb", cluster_draws(8, 2000, 5), 0.9)
    policies = _policies({"um_only_r1.82": 0.025, "combined_cap15pct_r1.82": 0.005}) | \
        _no_pool(["combined_cap30pct_r1.82"])
    got = answer(policies, 0.02, s, fallback_cap=0.3)["1.82"]
    assert got["policy"] == "all_local" and not got["decided"] and got["no_pool_for"] == "combined_cap30pct_r1.82"
    assert got["fallback"] == "30% cap kept: no cap beats it" and got["savings"] == 0.0
    # the point estimate would pool the 15% cap, whose saving the interval cannot tell from none
    assert answer(policies, 0.02, s)["1.82"]["policy"] == "combined_cap15pct_r1.82"


def _no_pool(names: list[str], pool_sockets: int = 0) -> dict:
    """Policies whose recommended pool is none: every pool size costs more DRAM than all local."""
    return {name: {"recommended_pool_sockets": pool_sockets,
                   "recommended": {"savings": 0.0, "server_cost_saving": 0.0, "local_gb_per_server": 300.0,
                                   "gb_per_pool": 0.0, "move_rate": 0.0005, "judged_move_rate": 0.0005},
                   "realized_mispredictions": {"1.82": 0.01}, "realized_unmitigated": {"1.82": 0.004}}
            for name in names}


def test_where_no_pool_pays_the_answer_is_all_local_not_a_policy_without_its_pool():
    got = answer(_no_pool(["um_only_r1.82", "combined_r1.82"]), 0.02)["1.82"]
    assert got["policy"] == "all_local" and got["pool_sockets"] == 0 and got["decided"]
    assert got["savings"] == 0.0 and got["gb_per_pool"] == 0.0 and got["savings_interval"] == [0.0, 0.0]
    assert got["realized_mispredictions"] == 0.0 and got["no_pool_for"] == "um_only_r1.82"
    assert got["local_gb_per_server"] == 300.0


def test_an_undecided_answer_whose_solver_policy_buys_no_pool_is_all_local():
    # a saves on half the clusters only; the solver's combined rule, the fallback, buys no pool at all
    t = _table({"all_local": [100] * 8, "a_r1.82": [50, 50, 115, 115, 115, 115, 115, 115]})
    s = Savings(t, "required_gb", cluster_draws(8, 2000, 5), 0.9)
    policies = _policies({"a_r1.82": 0.0125}) | _no_pool(["combined_r1.82"])
    got = answer(policies, 0.02, s)["1.82"]
    assert got["policy"] == "all_local" and not got["decided"] and got["no_pool_for"] == "combined_r1.82"
    assert got["undecided_between"][0] == "a_r1.82"


def test_every_accounting_asked_gets_its_interval_from_the_same_draws():
    t = _table({"all_local": [100, 200, 300, 400], "half": [90, 180, 270, 360]})
    t["kept_peak_required_gb"] = np.where(t.policy == "all_local", t.required_gb, t.required_gb * 10 / 9)  # no saving
    fleet = pd.DataFrame({"policy": ["half"], "pool_sockets": [16]})
    w = cluster_draws(4, 500, 1)
    two = with_intervals(fleet, Savings(t, "required_gb", w, 0.9), Savings(t, "peak_required_gb", w, 0.9))
    assert "savings_kept_placement_lo" not in two
    three = with_intervals(fleet, Savings(t, "required_gb", w, 0.9), Savings(t, "peak_required_gb", w, 0.9),
                           Savings(t, "kept_peak_required_gb", w, 0.9)).iloc[0]
    assert (three.savings_lo, three.savings_hi) == (pytest.approx(0.1), pytest.approx(0.1))
    assert (three.savings_kept_placement_lo, three.savings_kept_placement_hi) == (0.0, 0.0)


def test_the_served_saving_carries_its_reach_only_where_it_buys_a_pool():
    asked = []

    def reach(a: tuple[str, int], b: tuple[str, int]) -> float:
        asked.append((a, b))
        return 0.0031

    rows = {"1.82": {"policy": "combined_cap30pct_r1.82", "pool_sockets": 64, "savings": 0.0578},
            "2.22": {"policy": "all_local", "pool_sockets": 0, "savings": 0.0}}
    got = with_served_reach(rows, reach)
    assert asked == [(("combined_cap30pct_r1.82", 64), ("all_local", 0))]       # against all local, once
    assert got["1.82"]["placement_reach"] == 0.0031 and "placement_reach" not in got["2.22"]
    assert "placement_reach" not in rows["1.82"]                                # the rows given stay as they were
    assert with_served_reach(rows, None) == rows and len(asked) == 1            # reach_draws 0: nothing asked
