"""The built-in lab: a population of workload behaviours, 158 of them measured in the lab.

A cloud's VMs run far more workloads than a lab can characterize. The generator draws a
*population* (``generate.lab.population``, the 158 named workloads of Pond §6.1 among them) from
one behaviour model per class; the lab measures a sample stratified by class with Pond's class
sizes (158), and the fleet's VMs run workloads of the whole population. The slowdown truth of
every population workload (``population_truth.parquet``) is kept for evaluation only: no stage
trains on it, and a provider's export has no such file.

Mechanism, not marginals. Each workload gets latent memory behaviour; counters and slowdowns
are both *computed* from it, so they agree the way real ones do:

- ``d``  share of cycles stalled on demand DRAM misses (what TMA calls DRAM bound);
- ``h``  share of cycles that would stall if hardware prefetches arrived late: prefetching hides
         local latency up to ``c`` times the local latency and stops hiding it beyond;
- ``w``, ``q``  page-walk share of cycles and the share of walk loads served by DRAM
         (walk stalls are counted under L1 bound, not DRAM bound);
- ``u``  memory-bandwidth utilisation; queueing makes its cost grow with latency squared;
- ``cold`` share of the footprint rarely touched; ``g`` how sharply the rest is hot.

All-pool slowdown at latency ratio r (relative, then in percent)::

    S(r) = d (r-1) + h max(0, r-c) + w q (r-1) + 1.3 u^2 (r-1)^2      (1.3 = BW_QUEUEING)

so DRAM bound explains the first term only: workloads with a small DRAM bound can still slow
down a lot through prefetch lateness, page walks or bandwidth (Pond Finding 4). A spilled share
p of the footprint receives a share ``clip((p - cold) / (1 - cold), 0, 1) ** g`` of accesses.

``generate.variant`` changes mechanism strengths (``VARIANTS``): ``walks`` makes page walks and
bandwidth queueing a larger share of slowdowns, which DRAM bound does not see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Literal

import numpy as np
import pandas as pd

from pond.core.params import LabParams
from pond.telemetry.events import lab_events
from pond.telemetry.fleet.pool_counters import spill_counters
from pond.telemetry.fleet.portable import exp, log, power, sigmoid

LLC_MB = 27.5            # Cascade Lake 2S lab part, per socket
LOCAL_LAT_CYCLES = 195   # 78 ns at 2.5 GHz (docs/calibration.md, Latencies)
PEAK_LINES_PER_CYCLE = 0.10  # per-thread share of DRAM bandwidth, 64-byte lines per cycle
BW_QUEUEING = 1.3       # cost of bandwidth use on the slower, narrower pool link
INTENSITY_OFFSET = 2.8  # logit offset of DRAM-stall share; tuned against docs/calibration.md's shares
D_MAX = 0.31             # largest DRAM-stall share of cycles
LATE_PF_DEMAND = 0.05    # share of prefetch-covered stalls that stay demand misses locally
ETA_SD = 0.25            # slowdown variation no counter explains (relative)

SPLASH2X = ["barnes", "cholesky", "fft", "fmm", "lu_cb", "lu_ncb", "ocean_cp", "ocean_ncp",
            "radiosity", "radix", "raytrace", "volrend", "water_nsquared", "water_spatial"]
REDIS = [f"ycsb-{x}" for x in "abcdef"]
VOLTDB = ["tpcc", "ycsb-a", "ycsb-b"]
TPCH = [f"q{i:02d}" for i in range(1, 23)]
PROPRIETARY = [f"prop-{i:02d}" for i in range(1, 14)]

@dataclass(frozen=True)
class Mechanisms:
    """How strongly each slowdown mechanism acts in a fleet variant."""

    tlb_shift: float = 0.0                     # added to every class's log page-walk level
    walk_dram: tuple[float, float] = (0.2, 0.9)  # range of the share of walk loads served by DRAM
    bw_queueing: float = BW_QUEUEING
    bw_extra: float = 0.0                      # bandwidth use not explained by stalls or prefetches


VARIANTS: dict[str, Mechanisms] = {
    "pond": Mechanisms(),
    "walks": Mechanisms(tlb_shift=1.3, walk_dram=(0.5, 1.0), bw_queueing=2.4, bw_extra=0.08),
}
Variant = Literal["pond", "walks"]

# Per-class latent behaviour: mean/spread of memory intensity (logit), chance of prefetch-hidden
# traffic, page-walk level (log), footprint when unknown (log MB mean, sd), FP intensity, kernel share.
CLASS_PARAMS: dict[str, dict[str, float]] = {
    "spec-cpu2017":   dict(mu=-1.2, sd=4.2, pf=0.30, tlb=-5.5, fp_mu=6.5, fp_sd=1.5, fp=0.25, kern=0.02),
    "gapbs":          dict(mu=-0.2, sd=3.1, pf=0.10, tlb=-3.6, fp_mu=9.5, fp_sd=0.8, fp=0.01, kern=0.03),
    "spark":          dict(mu=-1.4, sd=3.9, pf=0.30, tlb=-4.6, fp_mu=10.0, fp_sd=0.8, fp=0.08, kern=0.10),
    "parsec":         dict(mu=-1.6, sd=4.2, pf=0.30, tlb=-5.5, fp_mu=6.5, fp_sd=1.5, fp=0.20, kern=0.04),
    "splash2x":       dict(mu=-2.2, sd=2.8, pf=0.25, tlb=-5.8, fp_mu=6.0, fp_sd=1.2, fp=0.30, kern=0.03),
    "redis":          dict(mu=-1.4, sd=3.6, pf=0.05, tlb=-4.4, fp_mu=9.0, fp_sd=0.8, fp=0.00, kern=0.30),
    "voltdb":         dict(mu=-1.4, sd=3.6, pf=0.10, tlb=-4.6, fp_mu=9.5, fp_sd=0.7, fp=0.02, kern=0.20),
    "tpch-mysql":     dict(mu=-1.4, sd=3.9, pf=0.35, tlb=-4.8, fp_mu=9.0, fp_sd=0.8, fp=0.03, kern=0.15),
    "proprietary":    dict(mu=-3.5, sd=4.8, pf=0.20, tlb=-4.8, fp_mu=9.0, fp_sd=1.0, fp=0.05, kern=0.15),
}


def catalogue() -> pd.DataFrame:
    """Workload names and classes as in Pond §6.1, with the lab's peak RSS where known."""
    ref = pd.read_csv(resources.files("pond.telemetry").joinpath("reference/workload-footprints.csv"))
    ref["workload_class"] = ref.suite.replace({"hibench-spark": "spark"})
    ref["workload_id"] = ref.suite + "/" + ref.workload
    rows = [ref[["workload_id", "workload_class", "peak_rss_mb"]]]
    for cls, names in (("splash2x", SPLASH2X), ("redis", REDIS), ("voltdb", VOLTDB),
                       ("tpch-mysql", TPCH), ("proprietary", PROPRIETARY)):
        rows.append(pd.DataFrame({"workload_id": [f"{cls}/{n}" for n in names],
                                  "workload_class": cls, "peak_rss_mb": np.nan}))
    return pd.concat(rows, ignore_index=True)


def population_catalogue(size: int, rng: np.random.Generator) -> pd.DataFrame:
    """The named workloads plus unnamed ones per class, in Pond's class proportions, ``size`` in all.

    An unnamed workload of a class with published footprints gets one of them, scattered by a
    factor of e^N(0, 0.3); in other classes the footprint is drawn with the rest of the behaviour.
    """
    cat = catalogue()
    extra = max(size - len(cat), 0)
    counts = cat.workload_class.value_counts(sort=False)
    share = counts / counts.sum() * extra
    n_new = np.floor(share).astype(int)
    n_new[share.sub(n_new).sort_values(ascending=False).index[: extra - n_new.sum()]] += 1
    rows = [cat]
    for cls, n in n_new.items():
        known = cat.loc[(cat.workload_class == cls) & cat.peak_rss_mb.notna(), "peak_rss_mb"].to_numpy()
        rss = (rng.choice(known, n) * exp(rng.normal(0.0, 0.3, n))) if len(known) else np.full(n, np.nan)
        rows.append(pd.DataFrame({"workload_id": [f"{cls}/pop-{i:04d}" for i in range(n)],
                                  "workload_class": cls, "peak_rss_mb": rss}))
    return pd.concat(rows, ignore_index=True)


def lab_sample(population: pd.DataFrame, along: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Positions of the lab's workloads: per class as many as Pond's lab ran, drawn systematically
    along ``along`` (the footprint: what a lab knows before it measures) from a random start, so that
    small and large workloads of every class are represented."""
    sizes = catalogue().workload_class.value_counts()
    picks = []
    for cls, n in sizes.sort_index().items():
        members = np.flatnonzero(population.workload_class.to_numpy() == cls)
        members = members[np.argsort(along[members], kind="stable")]
        step = len(members) / n
        picks.append(members[np.floor(rng.uniform(0, step) + step * np.arange(n)).astype(int)])
    return np.sort(np.concatenate(picks))


@dataclass
class Lab:
    """The population's latent behaviour and counter rates, and the lab's contract tables."""
    latent: pd.DataFrame                    # one row per population workload
    workloads: pd.DataFrame                 # the lab's sample
    slowdowns: pd.DataFrame
    rates: pd.DataFrame = field(repr=False)  # events per cycle, noise-free: what VMs inherit
    truth: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)  # population slowdowns, eval only
    spill_counters: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)  # counts of every spill run


def draw_latent(cat: pd.DataFrame, rng: np.random.Generator, mech: Mechanisms = Mechanisms()) -> pd.DataFrame:
    n = len(cat)
    p = pd.DataFrame([CLASS_PARAMS[c] for c in cat.workload_class], index=cat.index)
    fp_mb = cat.peak_rss_mb.to_numpy(float).copy()
    unknown = np.isnan(fp_mb)
    fp_mb[unknown] = exp(rng.normal(p.fp_mu[unknown], p.fp_sd[unknown]))
    pressure = log(fp_mb / LLC_MB)  # < 0 when the footprint fits in the LLC
    z = p.mu.to_numpy() + p.sd.to_numpy() * rng.standard_normal(n) + 0.45 * np.clip(pressure, -4, 4)
    intensity = sigmoid(z - INTENSITY_OFFSET)  # 0: cache-resident compute, 1: memory-bound
    d = D_MAX * intensity
    has_pf = rng.random(n) < p.pf.to_numpy()
    h = np.where(has_pf, rng.uniform(0.08, 0.45, n), rng.uniform(0.0, 0.01, n)) * (pressure > 0)
    c = rng.uniform(1.2, 2.6, n)
    d = d + LATE_PF_DEMAND * h  # streams whose prefetches already arrive late stall on demand misses
    w = np.minimum(exp(rng.normal(p.tlb.to_numpy() + mech.tlb_shift, 0.9)) * (1 + 0.25 * np.clip(pressure, 0, 8))
                   * 3 * power(intensity, 0.75), 0.2)
    q = rng.uniform(*mech.walk_dram, n)
    u = np.clip(0.9 * d + 0.8 * h + (np.abs(rng.normal(0, 0.05, n)) + mech.bw_extra) * np.sqrt(intensity),
                0.005, 0.9)
    mlp = np.clip(1.0 + exp(rng.normal(0.6, 0.7, n)) + 6 * h, 1.0, 12.0)
    return pd.DataFrame({
        "workload_id": cat.workload_id, "workload_class": cat.workload_class,
        "footprint_gb": fp_mb / 1024.0, "d": d, "h": h, "c": c, "w": w, "q": q, "u": u, "mlp": mlp,
        "bwq": np.full(n, mech.bw_queueing),
        "cold": rng.beta(1.5, 2.5, n) * 0.8, "g": exp(rng.normal(0.0, 0.5, n)),
        "eta": rng.normal(0.0, ETA_SD, n), "fp": p.fp.to_numpy() * rng.uniform(0.2, 1.8, n),
        "kern": p.kern.to_numpy() * rng.uniform(0.3, 1.7, n),
    })


def measured(true: np.ndarray, rng: np.random.Generator, params: LabParams) -> np.ndarray:
    """One run's slowdown (%) of each true slowdown: the lab's run-to-run noise, relative and absolute.
    A fleet VM's A/B run (``vms.build_vm_slowdowns``) is measured the same way."""
    return true * (1 + rng.normal(0, params.noise_rel, len(true))) + rng.normal(0, params.noise_pp, len(true))


def pool_slowdown(lat: pd.DataFrame, ratio: float, spilled_pct: np.ndarray | float = 100.0) -> np.ndarray:
    """Noise-free slowdown in percent for a spilled share of the footprint (see module doc)."""
    r1 = ratio - 1.0
    full = (lat.d * r1 + lat.h * np.maximum(0.0, ratio - lat.c) + lat.w * lat.q * r1
            + lat.bwq * lat.u ** 2 * r1 ** 2) * (1.0 + lat.eta)
    share = power(np.clip((np.asarray(spilled_pct) / 100.0 - lat.cold) / (1.0 - lat.cold), 0.0, 1.0), lat.g)
    return 100.0 * np.asarray(full) * np.asarray(share)


def event_rates(lat: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Counts per unhalted cycle of every lab event, computed from the latent behaviour."""
    n = len(lat)
    U = lambda lo, hi: rng.uniform(lo, hi, n)
    d, h, w, q, u, mlp = (lat[k].to_numpy() for k in ("d", "h", "w", "q", "u", "mlp"))
    l1b = U(0.02, 0.10) + 0.7 * w
    l2b = U(0.0, 0.05)
    l3b = U(0.0, 0.08) * (lat.footprint_gb.to_numpy() * 1024 > LLC_MB / 4)
    sb = U(0.0, 0.06)
    mem = d + l1b + l2b + l3b + sb
    cb = U(0.03, 0.25)
    scale = np.minimum(1.0, 0.93 / (mem + cb))
    mem, cb = mem * scale, cb * scale
    d, l1b, l2b, l3b, sb = (x * scale for x in (d, l1b, l2b, l3b, sb))
    backend = mem + cb
    split = rng.dirichlet([5.0, 2.0, 1.0], n) * (1.0 - backend)[:, None]
    ret, fe, bs = split.T
    e: dict[str, np.ndarray] = {}
    one = np.ones(n)
    freq = U(0.85, 1.15)
    e["CPU_CLK_UNHALTED.THREAD"] = one
    e["CPU_CLK_UNHALTED.THREAD_P"] = one
    e["CPU_CLK_UNHALTED.THREAD_ANY"] = one * U(1.0, 1.02)
    e["CPU_CLK_UNHALTED.REF_TSC"] = 1.0 / freq
    e["CPU_CLK_THREAD_UNHALTED.REF_XCLK_ANY"] = e["CPU_CLK_UNHALTED.REF_TSC"] / 25.0
    e["CPU_CLK_THREAD_UNHALTED.ONE_THREAD_ACTIVE"] = e["CPU_CLK_THREAD_UNHALTED.REF_XCLK_ANY"] * U(0.6, 1.0)
    slots = 4.0
    e["UOPS_RETIRED.RETIRE_SLOTS"] = ret * slots
    inst = e["UOPS_RETIRED.RETIRE_SLOTS"] / U(1.0, 1.3)
    e["INST_RETIRED.ANY"] = inst
    e["IDQ_UOPS_NOT_DELIVERED.CORE"] = fe * slots
    rec = bs * U(0.2, 0.5)
    e["INT_MISC.RECOVERY_CYCLES_ANY"] = rec
    e["UOPS_ISSUED.ANY"] = e["UOPS_RETIRED.RETIRE_SLOTS"] + bs * slots - slots * rec
    # Memory stalls, nested as the hardware counts them.
    e["CYCLE_ACTIVITY.STALLS_L3_MISS"] = d
    e["CYCLE_ACTIVITY.STALLS_L2_MISS"] = d + l3b
    e["CYCLE_ACTIVITY.STALLS_L1D_MISS"] = d + l3b + l2b
    e["CYCLE_ACTIVITY.STALLS_MEM_ANY"] = d + l3b + l2b + l1b
    e["EXE_ACTIVITY.BOUND_ON_STORES"] = sb
    e["EXE_ACTIVITY.EXE_BOUND_0_PORTS"] = 0.5 * cb
    e["EXE_ACTIVITY.1_PORTS_UTIL"] = 0.3 * cb
    e["EXE_ACTIVITY.2_PORTS_UTIL"] = 0.2 * cb / np.maximum(ret, 1e-3)
    # Demand misses: loaded latency grows with bandwidth use; MLP overlaps them.
    lat_cyc = LOCAL_LAT_CYCLES * (1.0 + 1.5 * u ** 2)
    stall_frac = np.clip(1.05 - 0.08 * mlp, 0.3, 0.95)
    miss_cycles = np.minimum(d / stall_frac, 0.98)
    outstanding = miss_cycles * mlp
    n_miss = outstanding / lat_cyc
    e["OFFCORE_REQUESTS.L3_MISS_DEMAND_DATA_RD"] = n_miss
    e["OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD"] = outstanding
    e["OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_L3_MISS_DEMAND_DATA_RD"] = miss_cycles
    e["OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD_GE_6"] = miss_cycles * np.clip((mlp - 2) / 10, 0, 0.9)
    n_l3hit = l3b * 2.0 / 50.0
    e["OFFCORE_REQUESTS.DEMAND_DATA_RD"] = n_miss + n_l3hit
    e["OFFCORE_REQUESTS_OUTSTANDING.DEMAND_DATA_RD"] = outstanding + n_l3hit * 50.0
    e["OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_DEMAND_DATA_RD"] = np.minimum(miss_cycles + l3b / 0.8, 0.99)
    e["OFFCORE_REQUESTS_OUTSTANDING.DEMAND_DATA_RD_GE_6"] = (
        e["OFFCORE_REQUESTS_OUTSTANDING.L3_MISS_DEMAND_DATA_RD_GE_6"] + l3b * 0.1)
    e["OFFCORE_REQUESTS_OUTSTANDING.CYCLES_WITH_DEMAND_RFO"] = sb * U(0.5, 1.0)
    e["OFFCORE_REQUESTS_BUFFER.SQ_FULL"] = u * U(0.05, 0.3)
    loads = inst * U(0.2, 0.4)
    e["MEM_INST_RETIRED.ALL_LOADS"] = loads
    e["MEM_INST_RETIRED.ALL_STORES"] = inst * U(0.08, 0.2)
    e["MEM_INST_RETIRED.LOCK_LOADS"] = loads * U(0.0, 0.01) * (1 + 10 * lat.kern.to_numpy())
    ret_miss = n_miss * U(0.6, 0.9)
    e["MEM_LOAD_RETIRED.L3_MISS"] = ret_miss
    e["MEM_LOAD_RETIRED.L3_HIT"] = n_l3hit * 0.8
    e["MEM_LOAD_RETIRED.L2_HIT"] = l2b * 4.0 / 14.0 + loads * U(0.002, 0.02)
    e["MEM_LOAD_RETIRED.L2_MISS"] = e["MEM_LOAD_RETIRED.L3_HIT"] + ret_miss
    l1_miss = e["MEM_LOAD_RETIRED.L2_HIT"] + e["MEM_LOAD_RETIRED.L2_MISS"]
    e["MEM_LOAD_RETIRED.L1_MISS"] = l1_miss
    e["MEM_LOAD_RETIRED.FB_HIT"] = l1_miss * U(0.1, 0.5)
    e["MEM_LOAD_RETIRED.L1_HIT"] = np.maximum(loads - l1_miss - e["MEM_LOAD_RETIRED.FB_HIT"], 0)
    e["MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM"] = ret_miss * 0.99
    e["MEM_LOAD_L3_MISS_RETIRED.REMOTE_DRAM"] = ret_miss * 0.01
    e["MEM_LOAD_RETIRED.LOCAL_PMM"] = np.zeros(n)
    e["MEM_LOAD_L3_MISS_RETIRED.REMOTE_PMM"] = np.zeros(n)
    share = U(0.0, 0.02)  # cross-core sharing
    e["MEM_LOAD_L3_HIT_RETIRED.XSNP_HIT"] = n_l3hit * share
    e["MEM_LOAD_L3_HIT_RETIRED.XSNP_HITM"] = n_l3hit * share * 0.5
    e["MEM_LOAD_L3_HIT_RETIRED.XSNP_MISS"] = n_l3hit * share * 0.3
    e["L1D_PEND_MISS.PENDING"] = outstanding + (l2b + l3b) * 2.0
    e["L1D_PEND_MISS.PENDING_CYCLES_ANY"] = np.minimum(miss_cycles + l2b + l3b, 0.99)
    e["L1D.REPLACEMENT"] = l1_miss * U(1.0, 1.3)
    # Prefetch-covered traffic: invisible in stalls, visible in prefetch and DRAM read counts.
    pf_lines = h * 8.0 / LOCAL_LAT_CYCLES
    e["L2_RQSTS.ALL_PF"] = pf_lines * 1.3 + 0.1 * n_miss
    e["L2_LINES_OUT.USELESS_HWPF"] = e["L2_RQSTS.ALL_PF"] * U(0.02, 0.2)
    dram_reads = n_miss / 0.8 + pf_lines
    e["OCR.ALL_READS.L3_MISS_LOCAL_DRAM.ANY_SNOOP"] = dram_reads
    e["OCR.ALL_READS.L3_MISS_LOCAL_DRAM.ANY_SNOOP:ocr_msr_val=0x3fB80007f7"] = dram_reads * 0.02
    e["OCR.ALL_READS.L3_MISS_LOCAL_DRAM.ANY_SNOOP:ocr_msr_val=0x3f804007f7"] = np.zeros(n)
    e["OCR.ALL_READS.L3_MISS_LOCAL_DRAM.ANY_SNOOP:ocr_msr_val=0x3f838007f7"] = np.zeros(n)
    e["L2_LINES_IN.ALL"] = l1_miss + pf_lines * 1.3
    e["L2_LINES_OUT.NON_SILENT"] = e["L2_LINES_IN.ALL"] * U(0.2, 0.5)
    e["L2_LINES_OUT.SILENT"] = e["L2_LINES_IN.ALL"] * U(0.3, 0.7)
    e["IDI_MISC.WB_UPGRADE"] = e["L2_LINES_OUT.NON_SILENT"] * U(0.1, 0.4)
    e["IDI_MISC.WB_DOWNGRADE"] = e["L2_LINES_OUT.NON_SILENT"] * U(0.1, 0.4)
    e["SW_PREFETCH_ACCESS.NTA"] = loads * U(0.0, 0.003)
    rd_lines = np.maximum(u * PEAK_LINES_PER_CYCLE / (1 + U(0.2, 0.6)), dram_reads)
    e["UNC_M_CAS_COUNT.RD"] = rd_lines
    e["UNC_M_CAS_COUNT.WR"] = rd_lines * U(0.2, 0.6)
    # Page walks: longer when walk loads go to DRAM (q).
    walk_len = 20.0 + 150.0 * q
    e["DTLB_LOAD_MISSES.WALK_ACTIVE"] = 0.8 * w
    e["DTLB_STORE_MISSES.WALK_ACTIVE"] = 0.2 * w
    walks = 0.8 * w / walk_len
    e["DTLB_LOAD_MISSES.WALK_COMPLETED"] = walks
    e["DTLB_LOAD_MISSES.WALK_COMPLETED_2M_4M"] = walks * U(0.0, 0.3)
    e["DTLB_LOAD_MISSES.WALK_COMPLETED_1G"] = walks * U(0.0, 0.02)
    e["DTLB_LOAD_MISSES.STLB_HIT"] = walks * U(2.0, 10.0)
    e["DTLB_STORE_MISSES.WALK_COMPLETED"] = 0.2 * w / walk_len
    e["DTLB_STORE_MISSES.STLB_HIT"] = 0.2 * w / walk_len * U(2.0, 10.0)
    e["EPT.WALK_PENDING"] = w * U(0.3, 0.8)
    # Frontend.
    e["ICACHE_16B.IFDATA_STALL"] = fe * U(0.1, 0.4)
    e["ICACHE_16B.IFDATA_STALL:c1:e1"] = e["ICACHE_16B.IFDATA_STALL"] / U(5.0, 20.0)
    e["ICACHE_64B.IFTAG_STALL"] = fe * U(0.05, 0.2)
    e["IDQ_UOPS_NOT_DELIVERED.CYCLES_0_UOPS_DELIV.CORE"] = fe * U(0.3, 0.6)
    itlb = fe * U(0.0, 0.002)
    e["ITLB_MISSES.WALK_COMPLETED"] = itlb
    e["ITLB_MISSES.WALK_COMPLETED_4K"] = itlb * U(0.6, 1.0)
    e["ITLB_MISSES.WALK_COMPLETED_2M_4M"] = itlb * U(0.0, 0.4)
    e["ITLB_MISSES.WALK_ACTIVE"] = itlb * U(20.0, 60.0)
    e["ITLB_MISSES.STLB_HIT"] = itlb * U(2.0, 8.0)
    issued = e["UOPS_ISSUED.ANY"]
    src = rng.dirichlet([4.0, 2.0, 0.5, 1.0], n) * issued[:, None]
    e["IDQ.DSB_UOPS"], e["IDQ.MITE_UOPS"], e["IDQ.MS_UOPS"], e["LSD.UOPS"] = src.T
    e["IDQ.MS_SWITCHES"] = e["IDQ.MS_UOPS"] / U(5.0, 20.0)
    e["DSB2MITE_SWITCHES.PENALTY_CYCLES"] = fe * U(0.02, 0.1)
    code_rd = fe * U(0.001, 0.01)
    e["L2_RQSTS.ALL_CODE_RD"] = code_rd
    e["L2_RQSTS.CODE_RD_MISS"] = code_rd * U(0.05, 0.4)
    e["L2_RQSTS.CODE_RD_HIT"] = code_rd - e["L2_RQSTS.CODE_RD_MISS"]
    # Branches and clears.
    e["BR_INST_RETIRED.ALL_BRANCHES"] = inst * U(0.05, 0.25)
    e["BR_MISP_RETIRED.ALL_BRANCHES"] = bs / U(15.0, 25.0)
    e["INT_MISC.CLEAR_RESTEER_CYCLES"] = e["BR_MISP_RETIRED.ALL_BRANCHES"] * U(5.0, 10.0)
    e["BACLEARS.ANY"] = e["BR_INST_RETIRED.ALL_BRANCHES"] * U(0.001, 0.01)
    e["MACHINE_CLEARS.COUNT"] = bs * U(0.0001, 0.001)
    e["MACHINE_CLEARS.MEMORY_ORDERING"] = e["MACHINE_CLEARS.COUNT"] * U(0.3, 0.9)
    e["MACHINE_CLEARS.SMC"] = e["MACHINE_CLEARS.COUNT"] * U(0.0, 0.05)
    # Floating point and execution ports.
    fp_mix = rng.dirichlet(np.full(8, 0.7), n) * (inst * lat.fp.to_numpy())[:, None]
    for i, k in enumerate(("SCALAR_DOUBLE", "SCALAR_SINGLE", "128B_PACKED_DOUBLE", "128B_PACKED_SINGLE",
                           "256B_PACKED_DOUBLE", "256B_PACKED_SINGLE", "512B_PACKED_DOUBLE",
                           "512B_PACKED_SINGLE")):
        e[f"FP_ARITH_INST_RETIRED.{k}"] = fp_mix[:, i]
    e["UOPS_EXECUTED.X87"] = inst * U(0.0, 0.002)
    e["UOPS_EXECUTED.THREAD"] = issued * U(1.0, 1.1)
    none = np.minimum(backend * U(0.5, 0.9), 0.95)
    e["UOPS_EXECUTED.CORE_CYCLES_NONE"] = none
    e["UOPS_EXECUTED.CORE_CYCLES_GE_1"] = 1.0 - none
    e["UOPS_EXECUTED.CORE_CYCLES_GE_2"] = (1.0 - none) * U(0.5, 0.8)
    e["UOPS_EXECUTED.CORE_CYCLES_GE_3"] = e["UOPS_EXECUTED.CORE_CYCLES_GE_2"] * U(0.4, 0.7)
    e["UOPS_ISSUED.VECTOR_WIDTH_MISMATCH"] = inst * U(0.0, 0.0005)
    e["ARITH.DIVIDER_ACTIVE"] = cb * U(0.0, 0.2)
    e["ROB_MISC_EVENTS.PAUSE_INST"] = inst * U(0.0, 0.001) * (1 + 5 * lat.kern.to_numpy())
    e["LD_BLOCKS.STORE_FORWARD"] = sb * U(0.01, 0.1)
    wide = (e["FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE"] + e["FP_ARITH_INST_RETIRED.512B_PACKED_SINGLE"]) / inst
    mid = (e["FP_ARITH_INST_RETIRED.256B_PACKED_DOUBLE"] + e["FP_ARITH_INST_RETIRED.256B_PACKED_SINGLE"]) / inst
    e["CORE_POWER.LVL2_TURBO_LICENSE"] = np.clip(4 * wide, 0, 0.9)
    e["CORE_POWER.LVL1_TURBO_LICENSE"] = np.clip(4 * mid, 0, 0.9) * (1 - e["CORE_POWER.LVL2_TURBO_LICENSE"])
    e["CORE_POWER.LVL0_TURBO_LICENSE"] = 1 - e["CORE_POWER.LVL1_TURBO_LICENSE"] - e["CORE_POWER.LVL2_TURBO_LICENSE"]
    e["CORE_POWER.THROTTLE"] = U(0.0, 0.001)
    # Kernel share and coherence traffic.
    kern = lat.kern.to_numpy()
    e["INST_RETIRED.ANY:SUP"] = inst * kern
    e["CPU_CLK_UNHALTED.THREAD:SUP"] = kern * U(0.8, 1.5)
    e["CPU_CLK_UNHALTED.REF_TSC:SUP"] = e["CPU_CLK_UNHALTED.THREAD:SUP"] / freq
    e["CPU_CLK_UNHALTED.RING0_TRANS"] = kern * U(1e-4, 5e-4)
    for name, scale in (("OFFCORE_RESPONSE:request=ALL_READS:response=L3_HIT.HITM_OTHER_CORE", 0.3),
                        ("OFFCORE_RESPONSE:request=ALL_READS:response=L3_HIT.HIT_OTHER_CORE_FWD", 0.2),
                        ("OFFCORE_RESPONSE:request=ALL_READS:response=L3_MISS.REMOTE_HITM", 0.01),
                        ("OFFCORE_RESPONSE:request=ALL_READS:response=L3_MISS.REMOTE_HIT_FORWARD", 0.01),
                        ("CORE_SNOOP_RESPONSE.RSP_IHITI", 0.5), ("CORE_SNOOP_RESPONSE.RSP_IHITFSE", 0.3),
                        ("CORE_SNOOP_RESPONSE.RSP_SFWDFE", 0.1), ("CORE_SNOOP_RESPONSE.RSP_SHITFSE", 0.1),
                        ("CORE_SNOOP_RESPONSE.RSP_SFWDM", 0.05), ("CORE_SNOOP_RESPONSE.RSP_IFWDM", 0.1),
                        ("CORE_SNOOP_RESPONSE.RSP_IFWDFE", 0.1)):
        e[name] = (n_l3hit + n_miss) * share * scale * U(0.5, 1.5)
    names = lab_events()
    missing = sorted(set(names) - set(e))
    assert not missing, f"lab model lacks events {missing}"
    return pd.DataFrame({k: np.maximum(e[k], 0.0) for k in names}, index=lat.index)


def _slowdown_grid(lat: pd.DataFrame, ratios, levels, repetitions: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Every (workload, ratio, spill level, repetition) run and its noise-free slowdown."""
    grid = pd.MultiIndex.from_product([range(len(lat)), ratios, levels, range(repetitions)],
                                      names=["i", "latency_ratio", "spilled_pct", "repetition"]).to_frame(index=False)
    sel = lat.iloc[grid.i.to_numpy()].reset_index(drop=True)
    true = np.zeros(len(grid))
    for ratio in ratios:
        m = (grid.latency_ratio == ratio).to_numpy()
        true[m] = pool_slowdown(sel[m], ratio, grid.spilled_pct.to_numpy()[m])
    grid["workload_id"] = sel.workload_id.to_numpy()
    return grid, true


def build_lab(params: LabParams, variant: Variant = "pond",
              sample_along: Callable[[pd.DataFrame], np.ndarray] | None = None) -> Lab:
    """``sample_along``: from the population's latent behaviour, the covariate the lab's sample follows
    (``lab_sample``); the footprint unless an analysis asks how another sample would calibrate
    (``benchmarks.analyses.lab_draws``). The draws after it are the same whatever it is."""
    rng = np.random.default_rng([params.seed, 1])
    population = population_catalogue(params.population, rng)
    lat = draw_latent(population, rng, VARIANTS[variant])
    rates = event_rates(lat, rng)
    along = lat.footprint_gb.to_numpy() if sample_along is None else np.asarray(sample_along(lat), float)
    in_lab = lab_sample(population, along, rng)
    lab_lat = lat.iloc[in_lab].reset_index(drop=True)
    cycles = power(10.0, rng.uniform(10.5, 12.0, len(lab_lat)))  # run lengths differ: features must normalize
    noise = exp(rng.normal(0.0, params.counter_noise, (len(lab_lat), rates.shape[1])))
    counts = np.round(rates.to_numpy()[in_lab] * cycles[:, None] * noise)
    workloads = pd.concat([lab_lat[["workload_id", "workload_class"]],
                           lab_lat.footprint_gb.round(3).rename("footprint_gb"),
                           pd.DataFrame(counts, columns=rates.columns)], axis=1)
    grid, true = _slowdown_grid(lab_lat, params.latency_ratios, params.spill_levels, params.repetitions)
    noisy = measured(true, rng, params)
    slowdowns = pd.DataFrame({"workload_id": grid.workload_id, "latency_ratio": grid.latency_ratio,
                              "spilled_pct": grid.spilled_pct.astype(float),
                              "slowdown_pct": noisy.round(3), "repetition": grid.repetition})
    runs = grid
    grid, true = _slowdown_grid(lat, params.latency_ratios, params.spill_levels, 1)
    truth = pd.DataFrame({"workload_id": grid.workload_id, "latency_ratio": grid.latency_ratio,
                          "spilled_pct": grid.spilled_pct.astype(float), "slowdown_pct": true.round(4)})
    truth["in_lab"] = truth.workload_id.isin(set(lab_lat.workload_id))
    # Drawn last, from a stream of their own: the tables above are the same with or without them.
    spills = spill_counters(lab_lat, rates.iloc[in_lab].reset_index(drop=True), runs, params.counter_noise,
                            np.random.default_rng([params.seed, 5]))
    return Lab(latent=lat, workloads=workloads, slowdowns=slowdowns, rates=rates, truth=truth, spill_counters=spills)
