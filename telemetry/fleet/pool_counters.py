"""What a workload's counters show while part of its memory is on the pool: the lab's spill runs.

The counters come from the same mechanisms as the slowdown (lab.py's module doc), never from the slowdown itself:
the slowdown's unexplained part (``eta``) and the lab's run noise stay out of them. With ``a`` the share of the
workload's DRAM accesses that reach the pool (``access_share``: its spilled share past the cold part) and ``r`` the
latency ratio, each local cycle of work gains

    demand  d (r-1) a          demand misses wait longer            (DRAM-bound stalls)
    late    h max(0, r-c) a    prefetches stop hiding the latency   (become DRAM-bound stalls)
    walks   w q (r-1) a        page-walk loads served by the pool   (L1-bound stalls, walk cycles)
    queue   bwq u^2 (r-1)^2 a  bandwidth queueing on the pool link  (DRAM-bound stalls)

so a run of the same work takes ``T = 1 + extra`` cycles per local cycle. Work events (instructions, uops, loads,
misses, prefetches, branches) count the same per unit of work and so fall by ``T`` per cycle; the stall events gain
their share of ``extra``; occupancy events grow with the miss latency (Little's law): that is what Memstrata reads,
the L3 miss latency, rising with the pool's share of the misses. Misses served by the pool are counted as remote DRAM
(the lab emulates the pool on the other socket's memory, Pond §6.1), and the local memory controller sees the rest.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pond.telemetry.fleet.portable import exp, power

# Events counted in cycles of the clock itself, not per unit of work: their rate per cycle does not change.
PER_CYCLE = ("CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.THREAD_P", "CPU_CLK_UNHALTED.THREAD_ANY",
             "CPU_CLK_UNHALTED.REF_TSC", "CPU_CLK_THREAD_UNHALTED.REF_XCLK_ANY",
             "CPU_CLK_THREAD_UNHALTED.ONE_THREAD_ACTIVE", "CORE_POWER.LVL0_TURBO_LICENSE",
             "CORE_POWER.LVL1_TURBO_LICENSE", "CORE_POWER.LVL2_TURBO_LICENSE", "CORE_POWER.THROTTLE")
DRAM_STALLS = ("CYCLE_ACTIVITY.STALLS_L3_MISS", "CYCLE_ACTIVITY.STALLS_L2_MISS", "CYCLE_ACTIVITY.STALLS_L1D_MISS")
# Occupancy of demand reads that miss L3, and of all demand reads (L3 hits too): only the misses wait longer.
L3_OCCUPANCY = ("OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD",
                "OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_L3_MISS_DEMAND_DATA_RD",
                "OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD_GE_6", "OFFCORE_REQUESTS_BUFFER.SQ_FULL")
ALL_OCCUPANCY = {"OFFCORE_REQUESTS_OUTSTANDING.DEMAND_DATA_RD": L3_OCCUPANCY[0],
                 "L1D_PEND_MISS.PENDING": L3_OCCUPANCY[0],
                 "OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_DEMAND_DATA_RD": L3_OCCUPANCY[1],
                 "L1D_PEND_MISS.PENDING_CYCLES_ANY": L3_OCCUPANCY[1],
                 "OFFCORE_REQUESTS_OUTSTANDING.DEMAND_DATA_RD_GE_6": L3_OCCUPANCY[2]}
COUNTS_CYCLES = {L3_OCCUPANCY[1], L3_OCCUPANCY[2], L3_OCCUPANCY[3], "L1D_PEND_MISS.PENDING_CYCLES_ANY",
                 "OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_DEMAND_DATA_RD",
                 "OFFCORE_REQUESTS_OUTSTANDING.DEMAND_DATA_RD_GE_6"}   # at most every cycle
WALK_CYCLES = ("DTLB_LOAD_MISSES.WALK_ACTIVE", "DTLB_STORE_MISSES.WALK_ACTIVE", "EPT.WALK_PENDING")
LOCAL_MEMORY = ("MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM", "OCR.ALL_READS.L3_MISS_LOCAL_DRAM.ANY_SNOOP",
                "UNC_M_CAS_COUNT.RD", "UNC_M_CAS_COUNT.WR")
REMOTE = "MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM"
LOCAL = "MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM"
IDLE = "UOPS_EXECUTED.CORE_CYCLES_NONE"
BUSY = ("UOPS_EXECUTED.CORE_CYCLES_GE_1", "UOPS_EXECUTED.CORE_CYCLES_GE_2", "UOPS_EXECUTED.CORE_CYCLES_GE_3")


def access_share(lat: pd.DataFrame, spilled_pct: np.ndarray | float) -> np.ndarray:
    """Share of the workload's DRAM accesses that reach the pool when ``spilled_pct`` of its footprint is there
    (the slowdown's own share, ``lab.pool_slowdown``)."""
    cold, g = lat.cold.to_numpy(), lat.g.to_numpy()
    return power(np.clip((np.asarray(spilled_pct, float) / 100.0 - cold) / (1.0 - cold), 0.0, 1.0), g)


def extra_cycles(lat: pd.DataFrame, ratio: np.ndarray | float, a: np.ndarray) -> dict[str, np.ndarray]:
    """The four mechanisms' extra cycles per local cycle (module doc), without the unexplained ``eta``."""
    r1 = np.asarray(ratio, float) - 1.0
    return {"demand": lat.d.to_numpy() * r1 * a,
            "late": lat.h.to_numpy() * np.maximum(0.0, r1 + 1.0 - lat.c.to_numpy()) * a,
            "walks": lat.w.to_numpy() * lat.q.to_numpy() * r1 * a,
            "queue": lat.bwq.to_numpy() * lat.u.to_numpy() ** 2 * r1 ** 2 * a}


def pool_rates(lat: pd.DataFrame, rates: pd.DataFrame, ratio: np.ndarray | float,
               spilled_pct: np.ndarray | float) -> pd.DataFrame:
    """Events per cycle of each row's workload (``lat``, ``rates``: aligned rows) run with ``spilled_pct`` of its
    footprint on a pool at latency ``ratio``. At 0% (or with no DRAM traffic) the rates are the local ones."""
    a = access_share(lat, spilled_pct)
    x = extra_cycles(lat, ratio, a)
    dram_extra = x["demand"] + x["late"] + x["queue"]
    total = 1.0 + dram_extra + x["walks"]
    e = {k: rates[k].to_numpy(np.float64) for k in rates.columns}
    # The miss latency's growth: the pool's share of the misses at r times the latency, queueing on top.
    r1 = np.asarray(ratio, float) - 1.0
    stretch = 1.0 + a * r1 * (1.0 + lat.bwq.to_numpy() * lat.u.to_numpy() ** 2 * r1)
    out = {k: v / total for k, v in e.items()}                       # work events
    for k in PER_CYCLE:
        out[k] = e[k]
    for k in DRAM_STALLS:
        out[k] = (e[k] + dram_extra) / total
    out["CYCLE_ACTIVITY.STALLS_MEM_ANY"] = (e["CYCLE_ACTIVITY.STALLS_MEM_ANY"] + dram_extra + x["walks"]) / total
    grown = {k: e[k] * stretch for k in L3_OCCUPANCY}
    grown.update({k: e[k] + e[src] * (stretch - 1.0) for k, src in ALL_OCCUPANCY.items()})
    for k, v in grown.items():
        out[k] = (np.minimum(v, 0.99 * total) if k in COUNTS_CYCLES else v) / total
    walk = lat.w.to_numpy()
    grow = np.where(walk > 0, 1.0 + x["walks"] / np.maximum(walk, 1e-12), 1.0)
    for k in WALK_CYCLES:
        out[k] = e[k] * grow / total
    out[REMOTE] = (e[REMOTE] + a * e[LOCAL]) / total
    for k in LOCAL_MEMORY:
        out[k] = e[k] * (1.0 - a) / total
    out[IDLE] = np.minimum(e[IDLE] + dram_extra + x["walks"], 0.99 * total) / total
    busy_before = np.maximum(1.0 - e[IDLE], 1e-12)
    for k in BUSY:
        out[k] = e[k] * (1.0 - out[IDLE]) / busy_before
    return pd.DataFrame({k: np.maximum(out[k], 0.0) for k in rates.columns}, index=rates.index)


def spill_counters(lat: pd.DataFrame, rates: pd.DataFrame, runs: pd.DataFrame, counter_noise: float,
                   rng: np.random.Generator) -> pd.DataFrame:
    """The lab's counts of every spill run (``runs``: ``i``, the row of ``lat``/``rates``, with ``workload_id``,
    ``latency_ratio``, ``spilled_pct``, ``repetition``): the run's rates x its length x the lab's counter noise."""
    i = runs.i.to_numpy()
    under = pool_rates(lat.iloc[i].reset_index(drop=True), rates.iloc[i].reset_index(drop=True),
                       runs.latency_ratio.to_numpy(float), runs.spilled_pct.to_numpy(float))
    cycles = power(10.0, rng.uniform(10.5, 12.0, len(runs)))
    noise = exp(rng.normal(0.0, counter_noise, under.shape))
    counts = np.round(under.to_numpy() * cycles[:, None] * noise)
    keys = runs[["workload_id", "latency_ratio", "spilled_pct", "repetition"]].reset_index(drop=True)
    keys = keys.assign(spilled_pct=keys.spilled_pct.astype(float))
    return pd.concat([keys, pd.DataFrame(counts, columns=rates.columns)], axis=1)


# The latent behaviour ``pool_rates`` reads: with the local rates, all that says how a workload's counters change on a
# pool. Nothing of the slowdown's unexplained part (``eta``) or its truth.
MECHANISMS = ("cold", "g", "d", "h", "c", "w", "q", "u", "bwq")


def mechanisms(lat: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """One row per workload: its ``MECHANISMS`` and local event rates (``contract.POOL_FILE``)."""
    return pd.concat([lat[["workload_id", *MECHANISMS]].reset_index(drop=True), rates.reset_index(drop=True)], axis=1)


def on_pool(counts: pd.DataFrame, mech: pd.DataFrame, ratio: float, spilled_pct: np.ndarray | float) -> pd.DataFrame:
    """Counts a VM showed on local DRAM (``counts``) as it shows them with ``spilled_pct`` of its memory on a pool at
    ``ratio``: each event times its workload's rate under the pool over its local rate (``mech``: ``mechanisms``'
    rows aligned with ``counts``, NaN where the workload is unknown). The VM's own cycles and counter noise carry
    over; events the mechanisms do not know are left as counted. ``counts`` may carry a few events only: the rates
    under the pool are worked out from all the workload's rates (cycles and stalls move the rest)."""
    known = [c for c in mech.columns if c not in MECHANISMS and c != "workload_id"]
    moved = [c for c in counts.columns if c in known]
    lat = mech[list(MECHANISMS)]
    under = pool_rates(lat, mech[known].fillna(0.0), ratio, spilled_pct)[moved].to_numpy(np.float64)
    local = mech[moved].fillna(0.0).to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(local > 0, under / local, 1.0)
    out = counts.copy()
    out[moved] = counts[moved].to_numpy(np.float64) * factor
    return out


POOL_SHARE_OF_VMS = 5   # `pond template`: every fifth VM with counters is shown counted on the pool


def recorded_on_pool(tables: dict[str, pd.DataFrame], mechanisms: pd.DataFrame, ratio: float) -> pd.DataFrame:
    """``vm_pool_counters`` as a hypervisor would record them: every ``POOL_SHARE_OF_VMS``-th VM with counters, all
    of it on the pool at ``ratio``, its first-hour counts as they read there (``pool_counters.on_pool``), an hour
    after its creation; a VM deleted within the hour is left out."""
    vms = tables["vms"].set_index("vm_id")
    counts = tables["vm_counters"].iloc[::POOL_SHARE_OF_VMS].reset_index(drop=True)
    vm = vms.reindex(counts.vm_id)
    measured = vm.created_at + pd.Timedelta(hours=1)
    alive = (vm.deleted_at.isna() | (vm.deleted_at > measured)).to_numpy()
    counts, vm, measured = counts[alive].reset_index(drop=True), vm[alive], measured[alive]
    mech = mechanisms.set_index("workload_id").reindex(vm.workload_id.to_numpy()).reset_index(drop=True)
    events = [c for c in counts.columns if c != "vm_id"]
    under = on_pool(counts[events], mech, ratio, 100.0)
    keys = pd.DataFrame({"vm_id": counts.vm_id, "latency_ratio": ratio, "pool_gb": vm.memory_gb.to_numpy(float),
                         "measured_at": measured.to_numpy()})
    return pd.concat([keys, np.round(under)], axis=1)
