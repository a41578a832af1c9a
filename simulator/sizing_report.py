"""What `simulate` reports from its sizing: the fleet's DRAM per policy and pool size against
all-local, the recommended pool per policy, the sizing answer (Pond §6.5) and what the served
policy saves; printed, as metrics and as Fig. 21."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pond.core.params import SimParams
from pond.core.plots import pyplot, save_figure
from pond.models.names import ALL_LOCAL, served_of, split_ratio
from pond.simulator.intervals import Savings
from pond.simulator.pool_sim import Placement

Reach = Callable[[tuple[str, int], tuple[str, int]], float]   # a pair's placement reach (simulator.placement_reach)

HEADLINE_SOCKETS = 16   # Pond Finding 9 quotes savings at a 16-socket pool


def recommend(curve: pd.DataFrame, tolerance: float) -> pd.Series | None:
    """The smallest pool whose saving is within ``tolerance`` of the best pool size's; None (buy no
    pool) when no pool size saves DRAM."""
    if curve.savings.max() <= 0:
        return None
    ok = curve[curve.savings >= curve.savings.max() - tolerance - 1e-12]
    return ok.sort_values("pool_sockets").iloc[0]


def summarize_sizing(table: pd.DataFrame, sp: SimParams) -> pd.DataFrame:
    """Per policy and pool size, the whole fleet: DRAM required (bought, topped up where the judged window
    needed more) against the all-local baseline; ``savings_bought``: before the top-up."""
    base = table[table.policy == "all_local"]
    base_gb, base_peak, base_bought = base.required_gb.sum(), base.peak_required_gb.sum(), base.bought_gb.sum()
    base_kept = base.kept_peak_required_gb.sum()
    t = table[table.policy != "all_local"].assign(local_gb=lambda d: d.local_gb_per_server * d.servers,
                                                  pool_gb=lambda d: d.gb_per_pool * d.pool_units)
    out = t.groupby(["policy", "pool_sockets"], sort=False)[
        ["required_gb", "bought_gb", "peak_required_gb", "kept_peak_required_gb", "servers", "pools", "pool_units", "moves", "stuck",
         "window_vms",
         "judged_moves",
         "judged_stuck", "judged_vms", "local_gb", "pool_gb"]
    ].sum().reset_index()
    out["all_local_gb"], out["all_local_peak_gb"] = base_gb, base_peak
    out["savings"] = 1 - out.required_gb / base_gb if base_gb else 0.0
    out["savings_bought"] = 1 - out.bought_gb / base_bought if base_bought else 0.0
    out["savings_per_server_peaks"] = 1 - out.peak_required_gb / base_peak if base_peak else 0.0
    # the same with every VM kept where all local put it (Pond's simulator keeps the trace's servers): the part of
    # the two accountings' gap a placement that knows the split makes
    out["savings_kept_placement"] = 1 - out.kept_peak_required_gb / base_kept if base_kept else 0.0
    # What one size per cluster costs over each server and pool at its own peak: the two accountings differ by how
    # much of it a pool recovers, (1 - saved) = (1 - saved at peaks) x (1 + this) / (1 + all local's)
    out["uniform_premium"] = out.required_gb / out.peak_required_gb.where(out.peak_required_gb > 0) - 1
    out["server_cost_saving"] = out.savings * sp.dram_cost_share
    out["move_rate"] = out.moves / out.window_vms.clip(lower=1)
    out["judged_move_rate"] = out.judged_moves / out.judged_vms.clip(lower=1)
    out["local_gb_per_server"] = out.local_gb / out.servers.clip(lower=1)
    out["gb_per_pool"] = out.pool_gb / out.pool_units.where(out.pool_units > 0, 1.0)
    return out.drop(columns=["local_gb", "pool_gb"])


def answer(policies: dict[str, Any], budget: float, savings: Savings | None = None,
           reach: Reach | None = None, fallback_cap: float | None = None) -> dict[str, Any]:
    """Per latency ratio, the sizing answer: of the nightly policies (not the static ones) whose
    realized mispredictions, those the QoS monitor left slowed where it ran, are within ``budget``, the one
    whose recommended pool saves the most. Chosen on the window it is measured on, as a provider chooses
    hardware from its history.

    With ``savings`` (the cluster draws), the answer is *decided* only when the best saves more than the
    runner-up (all local when it has none) beyond their paired interval, and with ``reach`` (the replay's own
    reach for the pair, ``simulator.placement_reach``) only when the interval's low end is beyond it too.
    Otherwise the answer says so, names both, and falls back to the solver's own policy, Pond's combined rule, at
    ``fallback_cap`` unless another cap beats it beyond their interval and reach (``fallback``); with no
    ``fallback_cap`` (or that cap not replayed or over the budget), at the cap whose point estimate saves most."""
    eligible: dict[str, list[tuple[str, dict[str, Any], float, float]]] = {}
    for name, p in policies.items():
        for ratio, mis in p["realized_mispredictions"].items():
            left = p.get("realized_unmitigated", {}).get(ratio, mis)
            if name.startswith("static_") or split_ratio(name)[1] != ratio or left > budget + 1e-12:
                continue
            eligible.setdefault(ratio, []).append((name, p, mis, left))
    out: dict[str, Any] = {}
    for ratio, rows in eligible.items():
        rows.sort(key=lambda r: -r[1]["recommended"]["savings"])       # stable: the first listed wins a tie
        name, p, mis, left = rows[0]
        a = {"policy": name, "pool_sockets": p["recommended_pool_sockets"], **p["recommended"],
             "realized_mispredictions": mis, "realized_unmitigated": left}
        if savings is not None:
            runner = rows[1] if len(rows) > 1 else None
            other = (runner[0], runner[1]["recommended_pool_sockets"]) if runner else ("all_local", 0)
            lo, hi = savings.difference((name, p["recommended_pool_sockets"]), other)
            moved = reach((name, p["recommended_pool_sockets"]), other) if reach is not None and lo > 0 else None
            decided = lo > (moved or 0.0)
            a |= {"decided": decided, "difference_interval": [lo, hi]} | (
                {} if moved is None else {"placement_reach": moved})
            if decided:
                a |= {"runner_up": other[0], "runner_up_pool_sockets": other[1]}
            else:                        # the pair the interval cannot separate, neither of them perhaps served
                a["undecided_pool_sockets"] = [p["recommended_pool_sockets"], other[1]]
                solver = [r for r in rows if split_ratio(r[0])[0].startswith("combined")]
                if solver:
                    (n2, p2, mis2, left2), why = fallback(solver, fallback_cap, savings, reach)
                    a |= {"policy": n2, "pool_sockets": p2["recommended_pool_sockets"], **p2["recommended"],
                          "realized_mispredictions": mis2, "realized_unmitigated": left2,
                          "undecided_between": [name, other[0]], "fallback": why}
                else:
                    a["undecided_between"] = [name, other[0]]
        out[ratio] = _no_pool(a, rows[0][1]) if a["pool_sockets"] == 0 else a
    return out


Row = tuple[str, dict[str, Any], float, float]      # an eligible policy: name, metrics, realized, left unmitigated


def fallback(solver: list[Row], cap: float | None, savings: Savings, reach: Reach | None) -> tuple[Row, str]:
    """Which of the combined rule's rows (``solver``: within the budget, by point estimate, best first) an
    undecided answer falls back to, and why. A configured ``cap`` stands unless another row beats it beyond their
    paired interval and, where that decides, the replay's own reach: across draws of one fleet the caps' point
    estimates trade places on noise, and the service should not follow them."""
    champion = next((r for r in solver if cap is not None and _cap_pct(r[0]) == round(100 * cap)), None)
    if champion is None:
        why = "no fallback cap" if cap is None else f"{cap:.0%} cap not sized or over budget"
        return solver[0], f"point estimate: {why}"
    held = (champion[0], champion[1]["recommended_pool_sockets"])
    for r in solver:
        if r is champion:
            continue
        challenger = (r[0], r[1]["recommended_pool_sockets"])
        lo, _ = savings.difference(challenger, held)
        if lo > 0 and lo > (reach(challenger, held) if reach is not None else 0.0):
            return r, f"beats the {cap:.0%} cap by {100 * lo:+.2f} points"
    return champion, f"{cap:.0%} cap kept: no cap beats it"


def _cap_pct(name: str) -> int | None:
    """A row's pool cap in whole percent, as its name carries it (``models.names``); None uncapped."""
    got = served_of(name)
    return None if got is None or got[1] is None else round(100 * got[1])


def _no_pool(a: dict[str, Any], best: dict[str, Any]) -> dict[str, Any]:
    """The answer where the policy it names buys no pool (no pool size saves DRAM under it): all local, which the
    service can serve (``optimize.serve: answer``), rather than a policy whose pool was never bought. Decided when
    even the best policy within the budget saves nothing at any pool size; otherwise the answer was undecided and
    the solver's own policy, which it falls back to, buys no pool."""
    keep = {k: a[k] for k in ("runner_up", "runner_up_pool_sockets", "difference_interval", "placement_reach",
                              "undecided_between", "undecided_pool_sockets", "fallback") if k in a}
    return {"policy": ALL_LOCAL, "pool_sockets": 0, **{k: v for k, v in best["recommended"].items()
                                                        if k != "savings_interval"},
            "savings": 0.0, "server_cost_saving": 0.0, "gb_per_pool": 0.0, "savings_interval": [0.0, 0.0],
            "realized_mispredictions": 0.0, "realized_unmitigated": 0.0,
            "decided": best["recommended_pool_sockets"] == 0, "no_pool_for": a["policy"], **keep}


def served(policies: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """Per latency ratio, what the policy the service applies (``names``: ratio -> its row) saves:
    at its recommended pool size and at the headline size, beside the sizing answer."""
    out: dict[str, Any] = {}
    for ratio, name in names.items():
        if split_ratio(name)[0] == ALL_LOCAL:     # nothing on a pool: the baseline itself
            out[ratio] = {"policy": ALL_LOCAL, "pool_sockets": 0, "savings": 0.0, "savings_interval": [0.0, 0.0],
                          "server_cost_saving": 0.0, "gb_per_pool": 0.0, "savings_at_headline": 0.0,
                          "realized_mispredictions": 0.0, "realized_unmitigated": 0.0}
            continue
        p = policies.get(name)
        if p is None:
            continue
        out[ratio] = {"policy": name, "pool_sockets": p["recommended_pool_sockets"], **p["recommended"],
                      "savings_at_headline": p.get("at_headline", {}).get("savings"),
                      "realized_mispredictions": p["realized_mispredictions"].get(ratio),
                      "realized_unmitigated": p.get("realized_unmitigated", {}).get(ratio)}
    return out


def with_served_reach(served_rows: dict[str, Any], reach: Reach | None) -> dict[str, Any]:
    """The served policy's saving per ratio with how far the replay itself moves it (``placement_reach`` against all
    local), where the policy buys a pool: all local has no saving to move, and no ``reach`` asks nothing."""
    return {r: sv | ({"placement_reach": reach((sv["policy"], sv["pool_sockets"]), (ALL_LOCAL, 0))}
                     if reach is not None and sv.get("pool_sockets") else {}) for r, sv in served_rows.items()}


def _interval(row: pd.Series, column: str) -> dict[str, list[float]]:
    """``{column}_interval: [lo, hi]`` where the row carries one (``simulator.intervals.with_intervals``)."""
    if f"{column}_lo" not in row.index:
        return {}
    return {f"{column}_interval": [round(float(row[f"{column}_lo"]), 5), round(float(row[f"{column}_hi"]), 5)]}


@dataclass(frozen=True)
class Measured:
    """What the sizing was measured on: the window's label, the VMs created in it, those of them no night scored,
    and the VMs alive when it opened that no policy decided (the steady-state check wants 0)."""

    label: str
    vms: int
    unscored: int
    undecided_at_open: int


@dataclass(frozen=True)
class Evidence:
    """What a verdict is judged by: the cluster draws of every saving (none: point estimates decide) and the
    replay's own reach for a pair (``simulator.placement_reach``; none: the interval alone decides)."""

    savings: Savings | None = None
    reach: Reach | None = None


def sizing_metrics(fleet: pd.DataFrame, table: pd.DataFrame, realized: dict, sp: SimParams, placement: Placement,
                   window: Measured, budget: float, served_names: dict[str, str] | None = None,
                   evidence: Evidence = Evidence()) -> dict[str, Any]:
    """`simulate`'s metrics: per policy its recommended pool and savings at the headline size, the
    sizing answer (judged by ``evidence``) and what the served policy saves."""
    savings = evidence.savings
    head = fleet[fleet.pool_sockets == HEADLINE_SOCKETS].set_index("policy")
    base = table[table.policy == "all_local"]
    judged_rate = float(base.judged_moves.sum() / max(base.judged_vms.sum(), 1))
    all_local = {"savings": 0.0, "server_cost_saving": 0.0, "gb_per_pool": 0.0,
                 "local_gb_per_server": round(float(base.required_gb.sum() / max(base.servers.sum(), 1)), 5),
                 "move_rate": round(float(base.moves.sum() / max(base.window_vms.sum(), 1)), 5),
                 "judged_move_rate": round(judged_rate, 5)}
    policies: dict[str, Any] = {}
    for name, curve in fleet.groupby("policy", sort=False):
        rec = recommend(curve, sp.recommend_tolerance)
        policies[name] = {
            "recommended_pool_sockets": 0 if rec is None else int(rec.pool_sockets),   # 0: no pool, all local
            "recommended": all_local if rec is None else {k: round(float(rec[k]), 5) for k in (
                "savings", "server_cost_saving", "local_gb_per_server", "gb_per_pool", "move_rate",
                "judged_move_rate")} | _interval(rec, "savings"),
            "realized_mispredictions": {r: v["conservative"] for r, v in realized.get(name, {}).items()},
            "realized_unmitigated": {r: v["unmitigated"] for r, v in realized.get(name, {}).items()},
            "mitigations": {r: v["mitigations"] for r, v in realized.get(name, {}).items()},
        }
        early = {r: v["conservative_created_before_window"] for r, v in realized.get(name, {}).items()
                 if "conservative_created_before_window" in v}
        if early:       # the VMs the window opened with, decided by the first night (whose models may have seen them)
            policies[name]["realized_mispredictions_created_before_window"] = early
        if name in head.index:
            r = head.loc[name]
            policies[name]["at_headline"] = {k: round(float(r[k]), 5) for k in (
                "savings", "savings_bought", "savings_per_server_peaks", "savings_kept_placement", "uniform_premium",
                "server_cost_saving",
                "move_rate", "judged_move_rate", "local_gb_per_server", "gb_per_pool")} | _interval(r, "savings") | \
                _interval(r, "savings_per_server_peaks") | _interval(r, "savings_kept_placement")
    return {"window": window.label, "window_vms": window.vms, "window_vms_unscored": window.unscored,
            "warmup_vms_alive_at_window_start": window.undecided_at_open, "assignment": placement.assignment,
            "oversized_vms": placement.oversized, "clusters": int(base.cluster.nunique()),
            "servers": int(base.servers.sum()), "max_move_rate": sp.max_move_rate,
            "all_local_gb": float(base.required_gb.sum()), "all_local_moves": int(base.moves.sum()),
            "all_local_uniform_premium": round(float(base.required_gb.sum() / max(base.peak_required_gb.sum(), 1e-9))
                                               - 1, 5),
            "search": sp.search,       # scan: every size the least whole GB that holds; steps: a search with noise
            "all_local_search_gap": search_gap(base) if sp.search == "steps" else None,
            "judged_vms": int(base.judged_vms.sum()), "all_local_judged_move_rate": round(judged_rate, 5),
            "dram_cost_share": sp.dram_cost_share, "headline_pool_sockets": HEADLINE_SOCKETS,
            "savings_at_headline": {p: round(float(r.savings), 5) for p, r in head.iterrows()},
            "savings_at_headline_interval": {p: _interval(r, "savings").get("savings_interval")
                                             for p, r in head.iterrows()},
            "interval": None if savings is None else {"level": savings.level, "draws": len(savings.weights),
                                                      "resampled": "clusters"},
            "misprediction_budget": budget,
            "answer": answer(policies, budget, savings, evidence.reach, sp.fallback_cap),
            "served": served(policies, served_names or {}), "policies": policies}


def search_gap(base: pd.DataFrame) -> float | None:
    """How much less DRAM all local needs, as a share, at the lowest whole GB a scan finds holding below what the
    sizing search found (``pool_fit.scanned_local``): the search's own noise. Every saving as a provider buys rests on
    that search, and the interval over clusters does not hold it. None where the replay does not search (the trace's
    servers kept)."""
    if "scanned_local_gb" not in base or base.scanned_local_gb.isna().all():
        return None
    searched = float((base.servers * base.searched_local_gb).sum())
    return round(1 - float((base.servers * base.scanned_local_gb).sum()) / searched, 5) if searched else 0.0


def cluster_scale(table: pd.DataFrame, pool_sockets: tuple[int, ...], sockets_per_server: int,
                  judged_days: float) -> dict[str, float | int]:
    """How the replay's clusters compare with production's: their servers, how many hold a whole pool of the largest
    size replayed (a smaller cluster buys that pool for the servers it has, and pools less), and the VMs created per
    cluster and day on the days judged (Pond's clusters: "millions of per-VM arrival/departure events" over 75 days,
    thousands a day)."""
    base = table[table.policy == ALL_LOCAL]
    servers = base.servers.to_numpy(int)
    largest = max((k // sockets_per_server for k in pool_sockets), default=1)
    per_day = base.judged_vms.to_numpy(float) / max(judged_days, 1e-9)
    if not len(servers):
        return {}
    return {"servers_min": int(servers.min()), "servers_median": float(np.median(servers)),
            "servers_max": int(servers.max()), "largest_pool_servers": int(largest),
            "clusters_holding_largest_pool": int((servers >= largest).sum()),
            "vms_created_per_cluster_day_median": round(float(np.median(per_day)), 1)}


def _bracket(iv: list[float] | None) -> str:
    return "" if not iv else f" [{100 * iv[0]:+.2f}%, {100 * iv[1]:+.2f}%]"


def _verdict(a: dict[str, Any]) -> str:
    """Whether the answer is decided beyond the paired interval over clusters, and what it is against."""
    if a["policy"] == ALL_LOCAL:
        return (f"; no pool: {a['no_pool_for']} buys none (no pool size saves DRAM under it), so the service "
                "serves all local")
    if "difference_interval" not in a:
        return ""
    lo, hi = a["difference_interval"]
    moved = a.get("placement_reach")
    beyond = "" if moved is None else f", the replay's own reach {100 * moved:.2f}"
    if a.get("undecided_between"):
        best, other = a["undecided_between"]
        return (f"; undecided: {best} against {other} differs by {100 * lo:+.2f} to {100 * hi:+.2f} points over "
                f"clusters (90%){beyond}, so the solver's own policy is named ({a.get('fallback', 'point estimate')})")
    return (f"; decided: beats {a['runner_up']} by {100 * lo:+.2f} to {100 * hi:+.2f} points over clusters "
            f"(90%){beyond}")


def print_report(m: dict[str, Any]) -> None:
    st = m.get("steady_state", {})
    print(f"simulate: {m['window_vms']} VMs created in the window ({m['window']}); {m['warmup_vms_alive_at_window_start']} "
          f"warm-up VMs alive at its start undecided (all local in every policy); {m['servers']} servers in "
          f"{m['clusters']} clusters ({m['assignment']}); moves <= {m['max_move_rate']:.1%} of VMs")
    if st.get("memory_hours_decided_before_creation_pct") is not None:
        print(f"simulate: {st['memory_hours_decided_pct']:.2f}% of the window's memory-hours carry a policy's decision, "
              f"{st['memory_hours_decided_before_creation_pct']:.2f}% by a night before the VM's creation (the "
              f"{st['vms_decided_by_the_first_night']} VMs the window opened with: by its first night)")
    print(f"simulate: DRAM judged on {m['judged_vms']} VMs; what all local bought moved "
          f"{100 * m['all_local_judged_move_rate']:.2f}% of them (a cluster over the move budget buys more)")
    if m.get("all_local_uniform_premium") is not None:
        static = {n: p["at_headline"]["uniform_premium"] for n, p in m["policies"].items()
                  if n.startswith("static_") and "uniform_premium" in p.get("at_headline", {})}
        print(f"simulate: one local size per cluster costs all local {100 * m['all_local_uniform_premium']:+.2f}% "
              "over each server at its own peak; at the headline pool " + ", ".join(
                  f"{n} {100 * v:+.2f}%" for n, v in static.items()) + " (what pools recover of it is the gap "
              "between the provider's saving and the per-server one)")
    if m.get("all_local_search_gap") is not None:
        print(f"simulate: the sizing search's own noise: a scan of every whole GB finds all local "
              f"{100 * m['all_local_search_gap']:.2f}% less DRAM than the search; each saving as a provider buys can "
              "move by about that with the search alone (the 90% intervals do not hold it)")
    print(f"simulate {'policy':16s} {'saved@16':>9s} {'per-server':>10s} {'moves':>6s} {'judged':>7s} "
          f"{'mispredicted->left slowed':>13s}  recommended")
    for name, p in m["policies"].items():
        h = p.get("at_headline", {})
        mis = ", ".join(f"{100 * v:.2f}->{100 * p['realized_unmitigated'][r]:.2f}% @{r}"
                        for r, v in p["realized_mispredictions"].items()) or "-"
        rec = p["recommended"]
        advice = (f"no pool: all local ({rec['local_gb_per_server']:.0f} GB/server) is cheaper at every size"
                  if p["recommended_pool_sockets"] == 0 else
                  f"{p['recommended_pool_sockets']} sockets: {rec['local_gb_per_server']:.0f} GB/server + "
                  f"{rec['gb_per_pool']:.0f} GB/pool, saves {100 * rec['savings']:+.2f}% DRAM "
                  f"({100 * rec['server_cost_saving']:+.2f}% server cost)")
        print(f"simulate {name:16s} {100 * h.get('savings', np.nan):+8.2f}% "
              f"{100 * h.get('savings_per_server_peaks', np.nan):+9.2f}% {100 * h.get('move_rate', np.nan):5.2f}% "
              f"{100 * h.get('judged_move_rate', np.nan):6.2f}% "
              f"{mis:>13s}  {advice}")
    for ratio, a in m["answer"].items():
        print(f"simulate answer at {ratio}: {a['policy']} ({100 * a['realized_mispredictions']:.2f}% mispredicted, "
              f"{100 * a['realized_unmitigated']:.2f}% left slowed by the QoS monitor, "
              f"budget {100 * m['misprediction_budget']:.0f}%): {a['pool_sockets']} sockets, "
              f"{a['local_gb_per_server']:.0f} GB/server + {a['gb_per_pool']:.0f} GB/pool, "
              f"saves {100 * a['savings']:+.2f}% DRAM{_bracket(a.get('savings_interval'))}{_verdict(a)}")
    for ratio, a in m.get("served", {}).items():
        best = m["answer"].get(ratio, {})
        note = ("the sizing answer (optimize.serve: answer serves it tonight)" if best.get("policy") == a["policy"] else
                f"the answer {best['policy']} saves {100 * best['savings']:+.2f}%: optimize.serve: answer serves it"
                if best else "no nightly policy was within the budget")
        mis = a["realized_mispredictions"]
        reach = "" if a.get("placement_reach") is None else \
            f" (the replay's own reach {100 * a['placement_reach']:.2f} points)"
        print(f"simulate served at {ratio}: {a['policy']} ({'-' if mis is None else f'{100 * mis:.2f}%'} mispredicted): "
              f"{a['pool_sockets']} sockets saves {100 * a['savings']:+.2f}% DRAM{reach}; {note}")


def plot_savings(curves: pd.DataFrame, path: Path, window: str, realized: dict) -> None:
    """One panel per latency ratio (its nightly policies, and the static pools in grey), legend beside."""
    plt = pyplot()
    names = list(dict.fromkeys(curves.policy))
    ratios = sorted({split_ratio(n)[1] for n in names if not n.startswith("static")} - {None}) or [None]
    fig, axes = plt.subplots(1, len(ratios), figsize=(6.5 * len(ratios), 5.0), sharey=True, squeeze=False)
    ticks = sorted(curves.pool_sockets.unique())
    for ax, ratio in zip(axes[0], ratios):
        shown = [n for n in names if n.startswith("static") or ratio is None or split_ratio(n)[1] == ratio]
        statics = [n for n in shown if n.startswith("static")]
        for i, name in enumerate(shown):
            c = curves[curves.policy == name]
            mis = realized.get(name, {})
            m = mis.get(ratio) if ratio is not None else next(iter(mis.values()), None)
            label = (name if ratio is None else split_ratio(name)[0]) + \
                ("" if m is None else f" ({100 * m:.1f}% left slowed)")
            if name in statics:   # greys, darker for larger static shares
                style = {"color": str(0.75 - 0.45 * statics.index(name) / max(len(statics) - 1, 1)), "ls": "--"}
            else:
                style = {"color": plt.get_cmap("tab10")(i % 10), "ls": "-"}
            ax.plot(c.pool_sockets, c.savings_pct, marker="o", ms=3, label=label, **style)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(k) for k in ticks])
        ax.minorticks_off()
        ax.set(xlabel="pool size (sockets)", title="all ratios" if ratio is None else f"pool latency {ratio}x local")
        ax.axhline(0, color="k", lw=0.5)
        ax.set_ylim(bottom=max(ax.get_ylim()[0], -20))
        ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel("DRAM saved vs all-local (%)")
    fig.suptitle(f"DRAM a provider buys (Pond Fig. 21)\n{window}", fontsize=9)
    save_figure(fig, path)
