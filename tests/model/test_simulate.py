"""`pond simulate` on the small fleet's backtest nights: every VM is decided by the night before
its creation, VMs before the first night fall back to all local, and the sizing adds up."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pond.evaluation import replay
from pond.models.decision import decide, policy_knobs
from pond.models.policy import Serve, read_policy
from pond.simulator.sizing_report import search_gap
from pond.telemetry.io import read_tables
from tests.conftest import params_file, run_pond, small_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sim(small_raw, small_backtest, tmp_path_factory):
    wd = tmp_path_factory.mktemp("sim")
    assert run_pond(["--params", str(params_file(wd / "params.yaml", small_params())), "simulate", "--raw", str(small_raw),
                     "--nightly", str(small_backtest), "--metrics", str(wd / "simulate.json"), "--plots",
                     str(wd / "plots"), "--out", str(wd / "out")]) == 0
    return wd, json.loads((wd / "simulate.json").read_text())


def test_every_vm_is_decided_by_the_night_before_its_creation(small_raw, small_backtest):
    vms = read_tables(small_raw, ["vms"])["vms"].set_index("vm_id")
    nights = replay.backtest_nights(small_backtest)
    assert [n.name for n in nights] == ["2026-01-07", "2026-01-08"]
    for night in nights:
        scores = pd.read_parquet(night / "scores.parquet")
        created = vms.loc[scores.vm_id, "created_at"].dt.tz_convert(None).dt.normalize()
        assert (created == pd.Timestamp(night.name) + pd.Timedelta(days=1)).all()   # the next day, no other
        um = json.loads((night / "um" / "manifest.json").read_text())
        assert pd.Timestamp(um["as_of"]) == pd.Timestamp(night.name)                 # trained that night
        for ratio in (1.82, 2.22):
            assert read_policy(night / f"policy_r{ratio:g}.json").as_of == night.name


def test_fallback_before_the_first_night_and_decisions_as_the_night_made_them(small_raw, small_backtest):
    vms = read_tables(small_raw, ["vms"])["vms"].sort_values("vm_id", kind="stable").reset_index(drop=True)
    nights = replay.backtest_nights(small_backtest)
    first = pd.Timestamp(nights[0].name, tz="UTC") + pd.Timedelta(days=1)
    in_window = (vms.created_at >= first).to_numpy() & (vms.created_at < first + pd.Timedelta(days=2)).to_numpy()
    decisions, _, scored, before = replay.nightly_policies(vms, in_window, nights, (1.82, 2.22))
    assert scored.sum() == in_window.sum() > 0
    # steady state: the VMs running when the first night's next day begins, created before it, are the first
    # night's to decide (scores_before.parquet); every other VM outside the window stays all local
    alive = ((vms.created_at < first) & (vms.deleted_at.isna() | (vms.deleted_at > first))).to_numpy()
    assert before.sum() > 0 and np.array_equal(before, alive & ~in_window)
    rest = ~in_window & ~before
    for d in decisions.values():
        assert (d["pool_gb"][rest] == 0).all() and (d["decision"][rest] == "local_only").all()
    early = pd.read_parquet(nights[0] / "scores_before.parquet")
    at = pd.Series(np.arange(len(vms)), index=vms.vm_id).loc[early.vm_id].to_numpy()
    first_knobs = policy_knobs(read_policy(nights[0] / "policy_r1.82.json"))["um_only"]
    mine = decide(vms.memory_gb.to_numpy()[at], early.has_history.to_numpy(), early["p_insensitive_r1.82"].to_numpy(),
                  early.um_raw.to_numpy(), first_knobs)
    assert np.array_equal(decisions[("um_only", 1.82)]["pool_gb"][at], mine["pool_gb"])
    assert (mine["pool_gb"] > 0).any()
    night = nights[1]
    s = pd.read_parquet(night / "scores.parquet")
    idx = pd.Series(np.arange(len(vms)), index=vms.vm_id).loc[s.vm_id].to_numpy()
    knobs = policy_knobs(read_policy(night / "policy_r2.22.json"))["combined"]
    own = decide(vms.memory_gb.to_numpy()[idx], s.has_history.to_numpy(), s["p_insensitive_r2.22"].to_numpy(),
                 s.um_raw.to_numpy(), knobs)
    assert np.array_equal(decisions[("combined", 2.22)]["pool_gb"][idx], own["pool_gb"])


def test_each_policy_row_refuses_the_li_call_by_its_own_flags_as_the_service_does(small_raw, small_backtest):
    from pond.evaluation.refusal import group_of, refused_calls

    vms = read_tables(small_raw, ["vms"])["vms"].sort_values("vm_id", kind="stable").reset_index(drop=True)
    nights = replay.backtest_nights(small_backtest)
    first = pd.Timestamp(nights[0].name, tz="UTC") + pd.Timedelta(days=1)
    in_window = (vms.created_at >= first).to_numpy() & (vms.created_at < first + pd.Timedelta(days=2)).to_numpy()
    start = (vms.created_at - first).dt.total_seconds().to_numpy()
    plain, _, scored, before = replay.nightly_policies(vms, in_window, nights, (1.82, 2.22))
    held, _, _, _ = replay.nightly_policies(vms, in_window, nights, (1.82, 2.22), (),
                                            replay.Refusal(start, 3600.0, 168 * 3600.0))
    decided, group = scored | before, group_of(vms.customer_id, vms.vm_type)
    refused_any = 0
    for key, d in plain.items():
        expected = np.zeros(len(vms), bool)
        expected[decided] = refused_calls(group[decided], start[decided], d["li_called"][decided],
                                          d["seen_slowed"][decided], 3600.0, 168 * 3600.0) & d["li_called"][decided]
        h = held[key]
        assert not h["li_called"][expected].any(), key          # a refused call is no call
        assert np.array_equal(h["li_called"], d["li_called"] & ~expected), key
        assert (h["pool_gb"] <= d["pool_gb"] + 1e-9).all(), key  # and keeps at most its LI call's pool
        assert np.array_equal(h["seen_slowed"], d["seen_slowed"]), key   # the monitor's flags, not the decision's
        refused_any += int(expected.sum())
    assert refused_any > 0


def test_sizing_adds_up(sim):
    wd, m = sim
    by_cluster = pd.read_csv(wd / "out" / "sizing_by_cluster.csv")
    fleet = pd.read_csv(wd / "out" / "sizing.csv")
    base = by_cluster[by_cluster.policy == "all_local"]
    assert m["all_local_gb"] == pytest.approx(base.required_gb.sum())
    assert np.allclose(by_cluster.required_gb, by_cluster.servers * by_cluster.local_gb_per_server
                       + by_cluster.pool_units * by_cluster.gb_per_pool)
    pooled = by_cluster[by_cluster.pool_sockets > 0]     # a pool is bought for the servers it has
    assert np.allclose(pooled.pool_units, pooled.servers / (pooled.pool_sockets // 2))
    scale = m["cluster_scale"]                           # how far the clusters are from production's
    assert (scale["servers_min"], scale["servers_max"]) == (base.servers.min(), base.servers.max())
    assert scale["largest_pool_servers"] == by_cluster.pool_sockets.max() // 2
    assert scale["clusters_holding_largest_pool"] == (base.servers >= scale["largest_pool_servers"]).sum()
    assert scale["vms_created_per_cluster_day_median"] > 0
    # every configuration meets the move budget on every cluster
    assert (by_cluster.moves <= np.floor(m["max_move_rate"] * by_cluster.window_vms + 1e-9)).all()
    # the search is the scan (simulate.search: scan): nothing below what it found holds, so no noise is measured
    assert m["search"] == "scan" and m["all_local_search_gap"] is None
    assert (base.scanned_local_gb == base.searched_local_gb).all() and base.scanned_local_gb.notna().all()
    # stepped, the metric is the share of all local's DRAM a scan below each cluster's answer saves
    stepped = base.assign(scanned_local_gb=base.searched_local_gb - np.arange(len(base)) % 2)
    assert search_gap(stepped) == pytest.approx(
        1 - (base.servers * stepped.scanned_local_gb).sum() / (base.servers * base.searched_local_gb).sum(), abs=1e-5)
    assert by_cluster[by_cluster.policy != "all_local"].scanned_local_gb.isna().all()
    row = fleet[(fleet.policy == "static_15pct") & (fleet.pool_sockets == 16)].iloc[0]
    assert m["policies"]["static_15pct"]["at_headline"]["savings"] == pytest.approx(
        1 - row.required_gb / m["all_local_gb"], abs=1e-5)
    assert {"combined_r1.82", "combined_r2.22", "static_15pct"} <= set(m["policies"])
    assert set(m["policies"]["static_15pct"]["realized_mispredictions"]) == {"1.82", "2.22"}
    assert (wd / "plots" / "savings.png").exists()
    # the policy the service applies (small_params: UM only) is reported per ratio from its own row
    for ratio in ("1.82", "2.22"):
        served = m["served"][ratio]
        row = m["policies"][f"um_only_r{ratio}"]
        assert served["policy"] == f"um_only_r{ratio}" and served["savings"] == row["recommended"]["savings"]
        assert served["realized_mispredictions"] == row["realized_mispredictions"][ratio]


def test_a_served_policy_no_other_row_is_gets_its_own_row(small_backtest):
    night = min(d for d in small_backtest.iterdir() if (d / "scores.parquet").exists())
    policy = read_policy(night / "policy_r1.82.json")
    assert set(replay.night_knobs(policy, (0.3,))) == {"combined", "li_only", "um_only", "combined_cap30pct"}
    capped = policy.model_copy(update={"serve": Serve(policy="um_only", pool_cap=0.2)})
    knobs = replay.night_knobs(capped, (0.3,))
    assert set(knobs) == {"combined", "li_only", "um_only", "combined_cap30pct", "um_only_cap20pct"}
    assert knobs["um_only_cap20pct"] == policy_knobs(capped)["served"]
    assert set(replay.night_knobs(policy.model_copy(update={"serve": Serve(policy="combined", pool_cap=0.3)}), (0.3,))) == \
        {"combined", "li_only", "um_only", "combined_cap30pct"}


def test_a_static_pool_takes_exactly_its_share_of_every_vm_or_whole_gb_when_asked():
    """Fig. 3's split is the share itself: on one-server pools it is then the same DRAM labelled twice. In whole GB
    (simulate.static_whole_gb, as the service sizes zNUMA nodes) a 2 or 4 GB VM gets none at 15%."""
    mem = np.array([2.0, 4.0, 8.0, 16.0, 64.0])
    decided = np.array([True, True, True, True, False])
    exact = replay.static_decisions(mem, decided, 0.15)
    np.testing.assert_allclose(exact["pool_gb"], [0.3, 0.6, 1.2, 2.4, 0.0], rtol=1e-12)
    np.testing.assert_allclose(exact["local_gb"] + exact["pool_gb"], mem, rtol=1e-12)
    assert list(exact["decision"]) == ["znuma"] * 4 + ["local_only"]
    assert not exact["seen_slowed"].any()
    whole = replay.static_decisions(mem, decided, 0.15, whole_gb=True)
    assert list(whole["pool_gb"]) == [0.0, 0.0, 1.0, 2.0, 0.0] and list(whole["znuma_gb"]) == list(whole["pool_gb"])
    assert list(whole["decision"]) == ["local_only", "local_only", "znuma", "znuma", "local_only"]


def test_the_warm_up_counts_from_the_trace_s_arrivals_not_its_oldest_vm():
    """A trace's first creation says nothing when an export holds VMs created years before its month."""
    from pond.simulator.trace import bulk_start

    day = pd.Timestamp("2026-01-01", tz="UTC")
    days = pd.Series([1, 40, 300, 310, 290, 1], index=[pd.Timestamp("2019-03-04", tz="UTC"), day,
                                                      *(day + pd.Timedelta(days=k) for k in (1, 2, 3, 4))])
    assert bulk_start(days) == day + pd.Timedelta(days=1)            # not 2019, nor the export's partial first day
    assert bulk_start(days.iloc[2:5]) == day + pd.Timedelta(days=1)  # a trace of full days starts on its first


def test_one_vm_from_2019_does_not_move_the_static_window(small_raw, tmp_path):
    from pond.telemetry.io import write_tables
    from tests.conftest import run_pond

    tables = read_tables(small_raw)
    old = tables["vms"].copy()
    old.loc[5, ["created_at", "deleted_at", "untouched_fraction"]] = [pd.Timestamp("2019-01-01", tz="UTC"), pd.NaT,
                                                                      np.nan]
    write_tables(tmp_path / "old", {**tables, "vms": old})
    got = {}
    for name, raw in (("export", small_raw), ("with_2019", tmp_path / "old")):
        metrics = tmp_path / f"{name}.json"
        assert run_pond(["simulate", "--static-only", "--raw", str(raw), "--out", str(tmp_path / name), "--metrics",
                     str(metrics), "--plots", str(tmp_path / f"{name}_plots")]) == 0
        got[name] = json.loads(metrics.read_text())
    assert got["with_2019"]["window"] == got["export"]["window"] and got["export"]["window_vms"] > 1000
    # static pools split every VM alive in the window, the one from 2019 too: none is left all local
    assert got["with_2019"]["warmup_vms_alive_at_window_start"] == got["export"]["warmup_vms_alive_at_window_start"] == 0


def test_kept_servers_a_fixed_split_never_raises_the_per_server_peaks(small_raw, tmp_path):
    """simulate.placement keep: the all-local first fit's servers are kept under every policy, as a
    trace's own, so a fixed share on the pool can only lower the sum of per-server and per-pool peaks. Placed
    afresh per policy (pool_aware, the default), the same static pools can raise it."""
    import yaml

    from tests.conftest import run_pond

    got = {}
    for placement in ("keep", "pool_aware"):
        params = small_params()
        params["simulate"]["placement"] = placement
        (tmp_path / f"{placement}.yaml").write_text(yaml.safe_dump(params))
        metrics = tmp_path / f"{placement}.json"
        assert run_pond(["--quiet", "--params", str(tmp_path / f"{placement}.yaml"), "simulate", "--static-only",
                     "--raw", str(small_raw), "--out", str(tmp_path / placement), "--metrics", str(metrics),
                     "--plots", str(tmp_path / f"{placement}_plots")]) == 0
        got[placement] = json.loads(metrics.read_text())["policies"]
    keep = [p["at_headline"]["savings_per_server_peaks"] for name, p in got["keep"].items() if name.startswith("static")]
    assert len(keep) == 4 and min(keep) >= 0
    assert sorted(keep) == [got["keep"][f"static_{s}pct"]["at_headline"]["savings_per_server_peaks"]
                            for s in (10, 15, 30, 50)]          # a larger share saves more


def test_dram_bought_ahead_is_judged_on_later_days_and_only_topped_up(small_raw, tmp_path):
    """simulate.buy_days: the window's first days buy each cluster's DRAM, the rest judges it. What
    was bought is never returned (required >= bought), what fell short on the judged days is counted and
    topped up; the per-server peaks are those of the judged days, where a fixed split still never costs."""
    import yaml

    from tests.conftest import run_pond

    got = {}
    for days in (0, 2):
        params = small_params()
        params["simulate"] |= {"placement": "keep", "buy_days": days}
        (tmp_path / f"{days}.yaml").write_text(yaml.safe_dump(params))
        metrics = tmp_path / f"{days}.json"
        assert run_pond(["--quiet", "--params", str(tmp_path / f"{days}.yaml"), "simulate", "--static-only",
                     "--raw", str(small_raw), "--out", str(tmp_path / str(days)), "--metrics", str(metrics),
                     "--plots", str(tmp_path / f"{days}_plots")]) == 0
        got[days] = (json.loads(metrics.read_text()), pd.read_csv(tmp_path / str(days) / "sizing_by_cluster.csv"))
    fitted, table = got[0]
    assert (table.bought_gb == table.required_gb).all() and (table.judged_moves == table.moves).all()
    assert (table.judged_vms == table.window_vms).all()
    ahead, table = got[2]
    assert "DRAM bought on its first 2 days, judged from" in ahead["window"]
    assert ahead["window_vms"] == table[table.policy == "all_local"].judged_vms.sum() < fitted["window_vms"]
    assert (table.required_gb >= table.bought_gb - 1e-9).all()
    held = table.judged_moves <= np.floor(ahead["max_move_rate"] * table.judged_vms + 1e-9)
    assert (table[held].required_gb == table[held].bought_gb).all()      # what held is not topped up
    assert (~held).any()                                                 # and the judged days do matter here
    peaks = [p["at_headline"]["savings_per_server_peaks"] for name, p in ahead["policies"].items()]
    assert len(peaks) == 4 and min(peaks) >= 0


def test_the_qos_monitor_runs_in_the_replay(sim):
    """Every nightly policy's window is watched, at most 1% of each day's VMs mitigated, and only what the monitor
    left slowed decides the sizing answer; a policy that mitigated some VMs is sized on its own VMs (their pool
    memory back as local one window after creation), so its row differs from a replay without the monitor."""
    _, m = sim
    for p in m["policies"].values():
        for ratio, raw in p["realized_mispredictions"].items():
            left, mitigated = p["realized_unmitigated"][ratio], p["mitigations"][ratio]
            assert left <= raw + 1e-12 and raw - left <= mitigated + 1e-12 and mitigated <= 0.01 + 1e-9
    assert any(v > 0 for p in m["policies"].values() for v in p["mitigations"].values())
    for ratio, a in m["answer"].items():
        assert a["realized_unmitigated"] <= m["misprediction_budget"]
        if a["policy"] == "all_local":      # no pool pays: nothing on a pool, nothing mispredicted
            assert a["realized_unmitigated"] == a["realized_mispredictions"] == 0.0
        else:
            assert a["realized_unmitigated"] == m["policies"][a["policy"]]["realized_unmitigated"][ratio]


def test_a_static_split_is_unwatched_and_on_one_server_pools_saves_nothing(sim):
    """Static pools are Pond's model-free Fig. 3 and Fig. 21's strawman: no monitor returns their pool memory, so
    every VM keeps its split, and on one-server pools (which pool nothing) the split is the same DRAM labelled twice
    in both accountings. Watched, ~1% of VMs came back all local, and the default draw's split "saved" -1.0%."""
    wd, m = sim
    static = {n: p for n, p in m["policies"].items() if n.startswith("static_")}
    assert static and all(v == 0 for p in static.values() for v in p["mitigations"].values())
    assert all(p["realized_unmitigated"] == p["realized_mispredictions"] for p in static.values())
    s = pd.read_csv(wd / "plots" / "savings.csv")
    one = s[s.policy.isin(static) & (s.pool_sockets == 2)]
    assert len(one) == len(static)
    assert (one.savings_pct.abs() <= 0.5).all() and (one.kept_placement_pct.abs() <= 0.5).all(), one


def test_steady_state_every_vm_of_the_window_carries_a_decision(sim):
    """Steady state: the VMs the window opens with are decided by the first night, as a service running for months
    decided them. Left all local under every policy, they bought every pool on top of local DRAM that could not
    shrink (docs/tonight.md, "Which policy the service applies"). The small fleet's window is the two nights' next days, so
    a VM of an earlier day is one of them."""
    _, m = sim
    st = m["steady_state"]
    assert st["memory_hours_decided_pct"] >= 99.0
    assert 0 < st["memory_hours_decided_before_creation_pct"] < st["memory_hours_decided_pct"]
    assert st["vms_decided_by_the_first_night"] > 0
    assert m["warmup_vms_alive_at_window_start"] == 0
    early = [p["realized_mispredictions_created_before_window"] for p in m["policies"].values()
             if "realized_mispredictions_created_before_window" in p]
    assert early and all(0 <= v <= 1 for e in early for v in e.values())


def test_every_saving_carries_its_interval_and_the_answer_its_verdict(sim):
    wd, m = sim
    fleet = pd.read_csv(wd / "out" / "sizing.csv")
    assert ((fleet.savings_lo <= fleet.savings + 1e-9) & (fleet.savings <= fleet.savings_hi + 1e-9)).all()
    assert ((fleet.savings_per_server_peaks_lo <= fleet.savings_per_server_peaks + 1e-9)
            & (fleet.savings_per_server_peaks <= fleet.savings_per_server_peaks_hi + 1e-9)).all()
    assert m["interval"] == {"level": 0.9, "draws": 2000, "resampled": "clusters"}
    for name, (lo, hi) in m["savings_at_headline_interval"].items():
        assert lo <= m["savings_at_headline"][name] <= hi
    for ratio, a in m["answer"].items():
        lo, hi = a["difference_interval"]
        assert lo <= hi
        if a["policy"] == "all_local":   # decided where no policy within the budget has a pool that saves
            assert a["pool_sockets"] == 0 and a["savings"] == 0.0 and a["savings_interval"] == [0.0, 0.0]
            pools = [n for n, p in m["policies"].items() if n.endswith(f"_r{ratio}") and p["recommended_pool_sockets"]
                     and p["realized_unmitigated"][ratio] <= m["misprediction_budget"]]
            assert a["decided"] == (not pools), pools
            continue
        # the replay's own reach is asked where the interval over clusters decides, and must be cleared too
        assert ("placement_reach" in a) == (lo > 0) and a["decided"] == (lo > a.get("placement_reach", 0.0) >= 0)
        if not a["decided"]:
            assert a["policy"].startswith("combined") or a["policy"] == a["undecided_between"][0]
    for sv in m["served"].values():          # what the service's policy saves, with how far the replay moves it
        assert ("placement_reach" in sv) == (sv["pool_sockets"] > 0) and sv.get("placement_reach", 0.0) >= 0


def test_optimize_serves_simulate_s_answer_without_a_hand_edit(sim, small_bundle, small_raw, tmp_path):
    """``optimize.serve: answer`` (params.yaml's default): tonight's policy serves the sizing answer at its ratio,
    with the answer's pool cap; with no simulate metrics, the solver's own combined rule."""
    from pond.models.names import served_of

    wd, m = sim
    params = small_params()
    params["optimize"]["serve"] = "answer"
    path = params_file(tmp_path / "params.yaml", params)
    common = ["--li", str(small_bundle / "li"), "--um", str(small_bundle / "um"), "--features",
              str(small_bundle / "features"), "--raw", str(small_raw), "--metrics", str(tmp_path / "o.json"),
              "--frontier", str(tmp_path / "f.csv"), "--plot", str(tmp_path / "f.png"),
              "--monitor", str(small_bundle / "monitor")]
    assert run_pond(["--params", str(path), "optimize", *common, "--out", str(tmp_path / "p.json"),
                     "--answer", str(wd / "simulate.json")]) == 0
    want = served_of(m["answer"]["1.82"]["policy"])
    got = read_policy(tmp_path / "p.json").serve
    assert want is not None and (got.policy, got.pool_cap) == want
    assert run_pond(["--params", str(path), "optimize", *common, "--out", str(tmp_path / "q.json"),
                     "--answer", str(tmp_path / "none.json")]) == 0
    fallback = read_policy(tmp_path / "q.json").serve
    assert (fallback.policy, fallback.pool_cap) == ("combined", None)
