"""The `simulate` stage's replay: the DRAM a provider must buy with and without pools, in steady state (Pond
§6.1, §6.5, Fig. 3 and 21), and how large the pools should be.

The whole trace is placed (``simulator.pool_sim.place``; on Dask by cluster partitions on the workers,
``simulator.trace``); DRAM is measured over a window only,
after a warm-up that fills servers as production does, so only the VMs alive in the window are
decided and replayed (``simulator.sizing``).

- Nightly (built-in fleet, or an import with model inputs): the window is the next days of the
  `backtest` nights. A VM created on one of them is decided by the policy and models of the night
  before its creation (``scores.parquet`` and ``policy_r<ratio>.json`` of that night), one policy
  per ``simulate.latency_ratios``, beside static pools (15%: Fig. 21's strawman). No model is
  trained here, and none saw the VM it decides.
- Static only (``--static-only``, e.g. an Azure V2 vmtable without model inputs): the window
  starts ``warmup_days`` after the first day of the trace's arrivals (``simulator.trace.bulk_start``:
  not its oldest VM, which an export of the VMs alive over a month may hold from years before); static
  policies only, each splitting every VM of the trace, the warm-up's too (Pond's Fig. 3: no model decides
  anything, so nothing falls back).

Flags remembered: a nightly policy's own monitor flags refuse the LI call to the later VMs of the flagged call's
customer and VM type for ``qos.refusal_hours``, as the service does (``evaluation.refusal``, ``Refusal``).

Fallback: a VM created before the window (or that no night scored) is all local under every
policy alike, so that warm-up VMs weigh the same on each side of every comparison. Long-lived
warm-up VMs hold half of the memory in use in the window's first days, so DRAM is measured after
``simulate.policy_warmup_days`` of the window (the nightly policies' own VMs filling servers; each
of them still decided by the night before its creation).

Placement: the trace's servers when it names them (VMs stay, the few that no longer fit move);
otherwise each policy is placed by a pool-aware first fit (``simulator.pool_fit``), as Pond's
scheduler places a VM knowing its split, or, with ``simulate.placement: keep``, the all-local first
fit's servers are kept under every policy as a trace's own (then a fixed split can only lower the
sum of per-server and per-pool peaks, as in Pond's Fig. 3). ``simulate.pool_caps`` replays the night's combined
policy with no VM over a share of its memory on the pool (``models.decision``): the same safe
decisions, spread evenly, which per-server and per-pool peaks reward.

Bought ahead (``simulate.buy_days``): the measured window's first days buy each cluster's DRAM, the rest
judges it (``simulator.sizing``): arrivals that no longer fit are counted, and a cluster over the move
budget buys more. Savings, mispredictions and per-server peaks are then those of the judged days.

The metrics' ``answer`` is, per ratio, the nightly policy within the budget that saves the most;
``served`` is the one the service applies (``optimize.serve``, ``optimize.pool_cap``), which is
replayed under its own name when no other row is it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pond.core.cluster import run_all, run_threads
from pond.core.errors import ConfigError
from pond.core.params import Params, SimParams
from pond.evaluation.combined import realize, summarize
from pond.evaluation.qos import summarize as monitor_summary
from pond.evaluation.refusal import group_of, refused_calls
from pond.evaluation.truth import measured_truths, truth_table
from pond.models.decision import LABELS, LOCAL_ONLY, ZNUMA, PolicyKnobs, decide, policy_knobs, served_name
from pond.models.names import ALL_LOCAL, at_ratio, capped_policy_name, static_policy_name
from pond.models.policy import Policy, read_policy
from pond.simulator.intervals import Savings, cluster_draws, with_intervals
from pond.simulator.placement_reach import Leaveout, Sizer, reach
from pond.simulator.sizing import Policy as SizedPolicy
from pond.simulator.sizing import Question, Trace, fleet_sizing, fleet_sizing_by_cluster
from pond.simulator.sizing_report import (
    Evidence,
    Measured,
    cluster_scale,
    served,
    sizing_metrics,
    summarize_sizing,
    with_served_reach,
)
from pond.simulator.trace import Span, Window, facts, gather_window, read_trace, seconds, span, split_trace, window_of
from pond.telemetry.io import release_unused_memory
from pond.telemetry.storage import Location, remove_tree


def backtest_nights(backtest_dir: Path) -> list[Path]:
    nights = sorted(d for d in Path(backtest_dir).iterdir() if (d / "scores.parquet").exists())
    if not nights:
        raise ConfigError(f"simulate: no backtest night in {backtest_dir} (a folder per night with scores.parquet): "
                          "run `pond backtest` first (dvc repro does)")
    return nights


def night_knobs(policy: Policy, caps: tuple[float, ...]) -> dict[str, PolicyKnobs]:
    """The night's policies, its combined policy under each pool cap (``combined_cap15pct``), and
    the one it serves under its own name (``served_name``) where that is none of them."""
    knobs = policy_knobs(policy)
    served = knobs.pop("served")
    c = knobs["combined"]
    knobs |= {capped_policy_name("combined", cap): PolicyKnobs(c.li_threshold, c.um_offset, cap) for cap in caps}
    name = served_name(policy)     # all local is the baseline every replay measures against: not replayed again
    return knobs if name in knobs or name == ALL_LOCAL else knobs | {name: served}


def nightly_policies(vms: pd.DataFrame, in_window: np.ndarray, nights: list[Path], ratios: tuple[float, ...],
               caps: tuple[float, ...] = (), refusal: Refusal | None = None
               ) -> tuple[dict[tuple[str, float | None], dict[str, np.ndarray]], dict[float, float], np.ndarray,
                          np.ndarray]:
    """Per (policy, ratio): the decision arrays of every VM (fallback: all local); the mean lab error rate per
    ratio (for pool-only VMs without truth); which window VMs a night scored before their creation; and which
    VMs created before the window the first night decided (``scores_before.parquet``: steady state). ``refusal``:
    each row's own flags refuse the LI call to the later VMs of their customer and VM type, as the service does
    (``evaluation.refusal``): the nights are decided again with those calls refused."""
    mem = vms["memory_gb"].to_numpy(float)
    row = pd.Series(np.arange(len(vms)), index=vms["vm_id"].to_numpy())
    local_all = {"decision": np.full(len(vms), LOCAL_ONLY, dtype=object), "local_gb": mem.copy(),
                 "pool_gb": np.zeros(len(vms)), "znuma_gb": np.zeros(len(vms)), "untouched_fraction": np.zeros(len(vms)),
                 "li_called": np.zeros(len(vms), bool), "seen_slowed": np.zeros(len(vms), bool)}
    out: dict[tuple[str, float | None], dict[str, np.ndarray]] = {}
    rates: dict[float, list[float]] = {r: [] for r in ratios}

    def decide_night(night: Path, scores: Path, which: np.ndarray,
                     refused: dict[tuple[str, float], np.ndarray] | None = None) -> np.ndarray:
        s = pd.read_parquet(scores)
        idx = row.reindex(s.vm_id.to_numpy()).to_numpy()
        ok = ~np.isnan(idx) & which[np.nan_to_num(idx, nan=0).astype(np.int64)]
        idx, s = idx[ok].astype(np.int64), s[ok]
        for ratio in ratios:
            policy = read_policy(night / f"{at_ratio('policy', ratio)}.json")
            for name, knobs in night_knobs(policy, caps).items():
                d = out.setdefault((name, ratio), {k: v.copy() for k, v in local_all.items()})
                p = s[at_ratio("p_insensitive", ratio)].to_numpy(np.float64)
                if refused is not None and (name, ratio) in refused:
                    p = np.where(refused[(name, ratio)][idx], np.nan, p)
                got = decide(mem[idx], s.has_history.to_numpy(), p, s.um_raw.to_numpy(), knobs)
                for k, v in got.items():
                    d[k][idx] = _shared_labels(v) if k == "decision" else v
                if at_ratio("seen_slowed", ratio) in s.columns:   # the QoS monitor's flag (backtest's nights write it)
                    d["seen_slowed"][idx] = s[at_ratio("seen_slowed", ratio)].to_numpy(bool)
                if at_ratio("touch_spill_pct", ratio) in s.columns:   # qos.touches: judged (0: every touch flagged)
                    d.setdefault("touch_spill_pct", np.zeros(len(vms), np.float32))[idx] = \
                        s[at_ratio("touch_spill_pct", ratio)].to_numpy(np.float32)
        hit = np.zeros(len(vms), bool)
        hit[idx] = True
        return hit

    scored = np.zeros(len(vms), bool)
    for night in nights:
        for ratio in ratios:
            rates[ratio].append(read_policy(night / f"{at_ratio('policy', ratio)}.json").li.error_rate)
        scored |= decide_night(night, night / "scores.parquet", in_window)
    before = np.zeros(len(vms), bool)
    first = nights[0] / "scores_before.parquet" if nights else None
    if first is not None and first.exists():
        before = decide_night(nights[0], first, ~in_window)
    if refusal is not None and refusal.hold_s > 0:
        refused = refusal.masks(vms, scored | before, out)
        if any(m.any() for m in refused.values()):
            for night in nights:
                decide_night(night, night / "scores.parquet", in_window, refused)
            if first is not None and first.exists():
                decide_night(nights[0], first, ~in_window, refused)
    return out, {r: float(np.mean(v)) for r, v in rates.items()}, scored, before


@dataclass(frozen=True)
class Refusal:
    """The service's memory of the monitor's flags in the replay: VM creation seconds, the flag's lag and hold."""

    created_s: np.ndarray
    lag_s: float
    hold_s: float

    def masks(self, vms: pd.DataFrame, decided: np.ndarray, rows: dict[tuple[str, float], dict[str, np.ndarray]]
              ) -> dict[tuple[str, float], np.ndarray]:
        """Per policy row, the VMs whose LI call its own flags refuse."""
        group = group_of(vms.customer_id[decided], vms.vm_type[decided])
        out = {}
        for key, d in rows.items():
            m = np.zeros(len(vms), bool)
            m[decided] = refused_calls(group, self.created_s[decided], d["li_called"][decided],
                                       d["seen_slowed"][decided], self.lag_s, self.hold_s)
            out[key] = m
        return out


_LABELS = np.array(LABELS, dtype=object)


def _shared_labels(decision: np.ndarray) -> np.ndarray:
    """The decisions as references to the three label strings. Copied into an object array as they
    come (fixed-width text), each VM gets a string of its own: 81 MB per policy instead of 9 at 1.1M
    window VMs; at 10M VMs (14 nightly policy and ratio pairs, 4 static), the stage's process peaked
    1.0 GiB higher."""
    return _LABELS[np.select([decision == label for label in LABELS], np.arange(len(LABELS)), 0)]


def static_decisions(mem: np.ndarray, decided: np.ndarray, fraction: float, whole_gb: bool = False
                     ) -> dict[str, np.ndarray]:
    """A static pool: ``fraction`` of every decided VM, exactly (Pond's Fig. 3), or rounded down to whole GB as the
    service sizes zNUMA nodes (``whole_gb``). Exact, a split on one-server pools is the same DRAM labelled twice;
    in whole GB it is not (at 15%, 12.7% of the default draw's GB, and none of a 2 or 4 GB VM's, goes to the pool),
    and its separate local and pool sizes cost up to a point more (the changelog has the figures)."""
    u = np.where(decided, fraction, 0.0)
    d = decide(mem, np.zeros(len(mem), bool), np.full(len(mem), np.nan), u, PolicyKnobs(None, 0.0))
    if not whole_gb:
        pool = u * np.asarray(mem, float)
        d = d | {"decision": np.where(pool > 0, ZNUMA, LOCAL_ONLY), "local_gb": mem - pool, "pool_gb": pool,
                 "znuma_gb": pool}
    return d | {"decision": _shared_labels(d["decision"]), "seen_slowed": np.zeros(len(mem), bool)}


def row_name(policy: str, ratio: float | None) -> str:
    """A policy row's name: a static pool's own, a nightly policy's at its latency ratio."""
    return policy if ratio is None else at_ratio(policy, ratio)


def nightly_window(t0: pd.Timestamp, nights: list[Path]) -> tuple[tuple[int, int], pd.Timestamp, pd.Timestamp]:
    """The measured window: the backtest nights' next days, as seconds from ``t0``, with its first
    day and the day after its last."""
    days = [pd.Timestamp(n.name, tz=t0.tz) + pd.Timedelta(days=1) for n in nights]
    lo, hi = min(days), max(days) + pd.Timedelta(days=1)
    return (int((lo - t0).total_seconds()), int((hi - t0).total_seconds())), lo, hi


def measured_window(window: tuple[int, int], label: str, sp: SimParams, nightly: bool, t0: pd.Timestamp
              ) -> tuple[tuple[int, int], str]:
    """The part of the nightly window DRAM is measured over: after ``policy_warmup_days`` of the
    nightly policies' VMs filling servers (at least its last day is kept)."""
    if not nightly or not sp.policy_warmup_days:
        return window, label
    lo = min(window[0] + 86400 * sp.policy_warmup_days, window[1] - 86400)
    if lo <= window[0]:
        return window, label
    first = t0 + pd.Timedelta(seconds=lo)
    return (lo, window[1]), (f"{label}; DRAM measured from {first:%Y-%m-%d %H:%M}, after "
                             f"{(lo - window[0]) / 86400:g} days of their VMs filling servers")


def buy_days_for(window: tuple[int, int], buy_days: int | str, last_arrival: int | None = None) -> int:
    """``simulate.buy_days`` for this window. ``auto``: its first whole weeks, up to half of it, once it holds two
    weeks of arrivals (up to ``last_arrival``: a window that only watches old VMs leave has nothing to judge), so
    that the days that buy DRAM and the days that judge it each see a weekly cycle; 0 below that."""
    if buy_days != "auto":
        return int(buy_days)
    end = window[1]
    if last_arrival is not None:                        # to the end of the (window's) day of its last arrival
        end = min(end, window[0] + 86400 * ((max(last_arrival - window[0], 0) + 86400) // 86400))
    days = max(end - window[0], 0) // 86400
    if days < 14:
        print(f"simulate: the measured window's arrivals span {days} days; buy_days: auto buys DRAM ahead "
              "from two weeks on (a week to buy, a week to judge): bought on the window it is judged on "
              "(backtest.nights: policy_warmup_days + 14 or more gives two weeks)")
        return 0
    return 7 * (days // 14)


def bought_ahead(window: tuple[int, int], label: str, buy_days: int | str, t0: pd.Timestamp,
                 last_arrival: int | None = None) -> tuple[tuple[int, int], tuple[int, int], str]:
    """(the window the DRAM is bought on, the one it is judged on, the label): the measured window's first
    ``buy_days`` buy, the rest judges (at least a day of it); both are the window when ``buy_days`` is 0."""
    buy_days = buy_days_for(window, buy_days, last_arrival)
    cut = min(window[0] + 86400 * buy_days, window[1] - 86400)
    if cut <= window[0]:
        if buy_days:
            print(f"simulate: the window is too short to buy DRAM on its first {buy_days} days and judge it on "
                  "the rest: bought on the window it is judged on")
        return window, window, label
    first = t0 + pd.Timedelta(seconds=cut)
    return (window[0], cut), (cut, window[1]), (f"{label}; DRAM bought on its first {(cut - window[0]) / 86400:g} "
                                                f"days, judged from {first:%Y-%m-%d %H:%M}")


def peak_growth(start: np.ndarray, end: np.ndarray, mem: np.ndarray, bought: tuple[int, int],
                judged: tuple[int, int]) -> float:
    """How much higher the fleet's alive memory peaks on the judged days than on the days that bought the DRAM:
    DRAM bought ahead on a fleet that is still filling up is judged on its growth as much as on its pools."""
    times = np.concatenate([start, end]).astype(np.int64)
    step = np.concatenate([mem, -mem]).astype(float)
    order = np.lexsort((step, times))                   # at one instant, departures before arrivals
    times, alive = times[order], np.cumsum(step[order])

    def peak(span: tuple[int, int]) -> float:
        lo, hi = np.searchsorted(times, span[0], "right"), np.searchsorted(times, span[1], "left")
        opening = alive[lo - 1] if lo else 0.0
        return float(max(opening, alive[lo:hi].max(initial=opening)))

    return peak(judged) / (peak(bought) or 1.0) - 1.0


def nightly_decisions(vms: pd.DataFrame, backtest_dir: Path, ratios: tuple[float, ...], caps: tuple[float, ...] = ()
                      ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[int, int], np.ndarray, dict]:
    """((start, end) seconds, window, created-in-window mask, decisions per (policy, ratio)) as `simulate`
    replays the nightly window; for the sizing benchmarks."""
    s = span([facts(vms, "cluster_id")])
    start, end = seconds(vms, s)
    nights = backtest_nights(backtest_dir)
    window, _, _ = nightly_window(s.t0, nights)
    created_in = (start >= window[0]) & (start < window[1])
    return (start, end), window, created_in, nightly_policies(vms, created_in, nights, ratios, caps)[0]


def _window(s: Span, nights: list[Path] | None, sp: SimParams) -> tuple[tuple[int, int], str]:
    """The window (seconds from the trace's start) and how the report names it."""
    if nights is not None:
        window, lo, hi = nightly_window(s.t0, nights)
        return window, f"{lo.date()} to {(hi - pd.Timedelta(days=1)).date()}, {len(nights)} nightly policies"
    first = s.bulk_start + pd.Timedelta(days=sp.warmup_days)
    if s.last_created < first:
        print(f"simulate: the trace is shorter than warmup_days={sp.warmup_days}: no warm-up, the whole trace "
              "is the window")
        first = s.t0
    return (max(int((first - s.t0).total_seconds()), 0), s.last_end + 1), \
        f"{first.date()} on, after {sp.warmup_days} days of warm-up"


def _placed_window(params: Params, client: Any | None, raw_dir: Location, nights: list[Path] | None, pack_by: str,
                   scratch: Location | None) -> tuple[Span, Window, tuple[int, int], str]:
    """The trace placed and cut to the window: in this process, or by the workers (``simulator.trace``)."""
    sp = params.simulate
    if client is None:
        vms = read_trace(raw_dir)
        s = span([facts(vms, pack_by)])
        window, label = _window(s, nights, sp)
        return s, window_of(vms, s, window, sp, pack_by), window, label
    assert scratch is not None
    runner = partial(run_all, client)
    s, parts = split_trace(runner, raw_dir, pack_by, params.engine.partitions, scratch)
    window, label = _window(s, nights, sp)
    print(f"simulate: the trace placed on Dask, one task per creation day, then per cluster partition "
          f"({len(parts)} partitions of {len(s.groups)} clusters)")
    return s, gather_window(runner, scratch, parts, s, window, sp, pack_by), window, label


@dataclass
class Replayed:
    """What ``replay`` measured: the sizing per cluster and per fleet, the metrics, the mispredictions each policy
    row realized, and how the window is named."""

    table: pd.DataFrame
    fleet: pd.DataFrame
    metrics: dict[str, Any]
    realized: dict[str, dict[str, dict[str, float]]]
    label: str


def replay(params: Params, client: Any | None, raw_dir: Location, nights: list[Path] | None, pack_by: str,
           scratch: Location | None) -> Replayed:
    """The trace placed, the window decided by every policy row, the DRAM each buys and what it realized (the
    module says how); on Dask when ``client`` is given (``scratch``: the workers' folder)."""
    sp = params.simulate
    s, w, window, label = _placed_window(params, client, raw_dir, nights, pack_by, scratch)
    if scratch is not None:
        remove_tree(scratch)                            # the workers' copy of the trace is not needed again
    release_unused_memory()                             # nor the rest of the trace (Arrow keeps freed pages)
    vms, start, end, placement = w.vms, w.start, w.end, w.placement
    if not ((start >= window[0]) & (start < window[1])).any():
        raise ConfigError(f"simulate: no VM was created in the window ({label}); check base.as_of and the trace")
    print(f"simulate: {len(vms)} of {s.rows} VMs alive in the window are decided and replayed")
    cluster, host = placement.cluster, placement.host
    mem = vms["memory_gb"].to_numpy(float)
    created_in = (start >= window[0]) & (start < window[1])
    rates: dict[float, float] = {}
    scored, before = created_in, np.zeros(len(vms), bool)
    names: dict[str, str] = {}
    decisions: dict[tuple[str, float | None], dict[str, np.ndarray]] = {}
    if nights is not None:
        decisions, rates, scored, before = nightly_policies(
            vms, created_in, nights, sp.latency_ratios, sp.pool_caps,
            Refusal(start, params.features.counter_delay_s, 3600.0 * params.qos.refusal_hours))
        names = {f"{r:g}": row_name(served_name(read_policy(nights[-1] / f"{at_ratio('policy', r)}.json")), r)
                 for r in sp.latency_ratios}
    for f in sp.static_fractions:                       # a static pool splits every VM, as Fig. 3 does
        decisions[(static_policy_name(f), None)] = static_decisions(mem, np.ones(len(vms), bool), f, sp.static_whole_gb)
    decided, (window, label) = created_in | before, measured_window(window, label, sp, nights is not None, s.t0)
    if nights is None:                                  # static pools only: they split every VM, the window's first too
        decided = np.ones(len(vms), bool)
    arrivals = start[(start >= window[0]) & (start < window[1])]
    bought, judged, label = bought_ahead(window, label, sp.buy_days, s.t0,
                                         int(arrivals.max()) if len(arrivals) else window[0])
    if judged != bought:
        growth = peak_growth(start, end, mem, bought, judged)
        label += f"; the fleet's alive memory peaks {growth:+.1%} on the judged days against the bought ones"
        print(f"simulate: {label}")
    steady = decided_share(start, end, mem, scored, before, judged)
    created_in = (start >= judged[0]) & (start < judged[1])
    ratios = sp.latency_ratios if nights is not None else ()
    mitigated, realized = _watched(vms, decided, start, decisions, raw_dir, params, ratios,   # static only: nothing
                                   created_in[decided], rates, before[decided])
    back = _returns(mitigated, decided, start, params.features.counter_delay_s)
    policies = {row_name(p, r): (d["pool_gb"], back[row_name(p, r)]) if row_name(p, r) in back else d["pool_gb"]
                for (p, r), d in decisions.items()}
    del decisions                                       # the rest of each row's arrays: not needed to size

    trace = Trace(start, end, cluster, host, vms["vcpus"].to_numpy(float), mem)
    question = Question(placement.sockets_per_host, sp.pool_sockets, bought, sp.sockets_per_server * sp.socket_vcpus,
                        sp.max_move_rate, placement.assignment != "trace" and sp.placement == "pool_aware",
                        None if judged == bought else judged, sp.search == "scan")
    size: Sizer = fleet_sizing
    if client is not None or params.engine.workers > 1:   # the same tasks, the same table: one per cluster and policy
        run = partial(run_all, client) if client is not None else \
            partial(run_threads, params.engine.workers, "simulate: sizing")
        size = partial(fleet_sizing_by_cluster, run)
        print(f"simulate: sizing {'on Dask' if client is not None else f'on {params.engine.workers} threads'}, "
              f"one task per cluster and policy ({len(np.unique(cluster))} clusters)")
    table = size(trace, policies, question)
    table.insert(3, "cluster_name", np.asarray(s.groups.astype(str))[table.cluster.to_numpy()])
    draws = cluster_draws(int(table.cluster.nunique()), sp.interval_draws, params.base.seed)
    savings = Savings(table, "required_gb", draws, sp.interval)
    fleet = with_intervals(summarize_sizing(table, sp), savings, Savings(table, "peak_required_gb", draws, sp.interval),
                           Savings(table, "kept_peak_required_gb", draws, sp.interval))
    moved = partial(_reach, size, trace, policies, question, table, sp, params.base.seed)
    measured = Measured(label, int(created_in.sum()), int((created_in & ~scored).sum()),
                        int(((start < judged[0]) & (end > judged[0]) & ~decided).sum()))
    metrics = sizing_metrics(fleet, table, realized, sp, placement, measured, params.optimize.budget, names,
                             Evidence(savings, moved))
    if nights is not None and params.optimize.serve == "answer":    # tonight's optimize serves this answer
        metrics["served"] = served(metrics["policies"], {r: a["policy"] for r, a in metrics["answer"].items()})
    metrics["served"] = with_served_reach(metrics["served"], moved if sp.reach_draws else None)
    metrics["cluster_scale"] = cluster_scale(table, question.pool_sockets, question.sockets_per_server,
                                             (judged[1] - judged[0]) / 86400)
    metrics["steady_state"] = steady if nights is not None else {"memory_hours_decided_pct": 100.0,
                                                                 "memory_hours_decided_before_creation_pct": None}
    return Replayed(table, fleet, metrics, realized, label)


def _reach(size: Sizer, trace: Trace, policies: dict[str, SizedPolicy], q: Question, table: pd.DataFrame,
           sp: SimParams, seed: int, a: tuple[str, int], b: tuple[str, int]) -> float:
    """The pair's placement reach (``simulator.placement_reach``), printed: it costs a few sizings of the two."""
    got = reach(size, trace, policies, q, table, a, b, Leaveout(sp.reach_share, sp.reach_draws, seed))
    print(f"simulate: {a[0]} ({a[1]} sockets) against {b[0]} ({b[1]}): {sp.reach_draws} draws leaving out "
          f"{sp.reach_share:.0%} of the VMs move the difference by up to {100 * got:.2f} points")
    return got


def decided_share(start: np.ndarray, end: np.ndarray, mem: np.ndarray, scored: np.ndarray, before: np.ndarray,
                  window: tuple[int, int]) -> dict[str, float]:
    """Of the memory-hours of ``window`` (GB x hours each VM is alive in it): the share a nightly policy decides
    (a static pool decides all of it), and the share decided by a night before the VM's creation (the rest, VMs
    the window opened with, by its first night: a production service decided them, with models that had not
    seen them)."""
    hours = np.clip(np.minimum(end, window[1]) - np.maximum(start, window[0]), 0, None) * mem / 3600.0
    total = float(hours.sum()) or 1.0
    return {"memory_hours_decided_pct": round(100.0 * float(hours[scored | before].sum()) / total, 3),
            "memory_hours_decided_before_creation_pct": round(100.0 * float(hours[scored].sum()) / total, 3),
            "vms_decided_by_the_first_night": int(before.sum())}


def _watched(vms: pd.DataFrame, decided: np.ndarray, start: np.ndarray, decisions: dict, raw_dir: Location,
             params: Params, ratios: tuple[float, ...], counted: np.ndarray, rates: dict[float, float],
             before: np.ndarray | None = None
             ) -> tuple[dict[tuple[str, float], np.ndarray], dict[str, dict[str, dict[str, float]]]]:
    """Per (policy row, latency ratio): which of the VMs the window decided the QoS monitor mitigated
    (``evaluation.combined`` outcomes, ``evaluation.qos``: each day's capacity, flags in order of creation), and,
    per policy row and ratio, the mispredictions it realized on the VMs the window judges (``counted``, of the
    decided ones): before the monitor (``conservative``) and what it left slowed (``unmitigated``). A static pool
    is judged at every ratio, unwatched: it is Pond's model-free Fig. 3 and Fig. 21's strawman ("about 2.5% of
    scheduling mispredictions", none mitigated), and a split that the monitor's returns made uneven could not be
    the same DRAM labelled twice on one-server pools. A nightly policy is judged at its own ratio. Each row's
    outcomes are summed up as they are made and dropped: held for every row together (and each row's decisions
    whole while sizing), they took the stage's process to 7.35 GiB at 10M VMs on Dask, against 3.77 GiB without."""
    mitigated: dict[tuple[str, float], np.ndarray] = {}
    realized: dict[str, dict[str, dict[str, float]]] = {}
    vms, created = vms[decided], start[decided]
    own = measured_truths(raw_dir, ratios, vms)
    unwatched = params.qos.model_copy(update={"max_mitigated_share": 0.0})
    for ratio in ratios:
        table, _ = truth_table(raw_dir, ratio)
        for (policy, r), d in decisions.items():
            if r is None or r == ratio:
                name = row_name(policy, r)
                q = unwatched if r is None else params.qos
                judged = d["touch_spill_pct"][decided] if "touch_spill_pct" in d else None
                w = realize(vms, {k: v[decided] for k, v in d.items()}, table, params.optimize.pdm, own[ratio],
                            d["seen_slowed"][decided], q, created, created // 86400, judged)
                mitigated[(name, ratio)] = w["mitigated"].to_numpy()
                rate = rates.get(ratio, 0.0)
                sums = summarize(w[counted], rate) | monitor_summary(w[counted], rate)
                got = {"conservative": sums["mispredictions_conservative"],
                       "unmitigated": sums["mispredictions_unmitigated"], "mitigations": sums["mitigations"]}
                if before is not None and before.any():     # decided by a night whose models may have seen them
                    got["conservative_created_before_window"] = summarize(w[before], rate)["mispredictions_conservative"]
                realized.setdefault(name, {})[f"{ratio:g}"] = got
    return mitigated, realized


def _returns(mitigated: dict[tuple[str, float], np.ndarray], decided: np.ndarray, start: np.ndarray,
             window_s: int) -> dict[str, np.ndarray]:
    """Per policy row, the second each VM's pool memory comes back as local (-1: never): a mitigated VM's, one QoS
    window after its creation. A static pool's never do (``_watched``)."""
    out: dict[str, np.ndarray] = {}
    for (name, _), m in mitigated.items():
        if name not in out:
            back = np.full(len(start), -1, np.int64)
            at = np.flatnonzero(decided)[m]
            back[at] = start[at] + window_s
            out[name] = back
    return out
