"""How closely a fleet (built-in or imported) resembles the published one (docs/calibration.md).

Every check is computed from the contract tables alone, so the same report runs on a team's
real telemetry. ``tolerance`` is absolute, in the unit of the figure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pond.features.tma import tma_metrics
from pond.models.li import at_full_pool


@dataclass(frozen=True)
class Check:
    name: str
    value: float
    target: float
    tolerance: float
    source: str
    kind: str = "near"  # near: |value - target| <= tolerance; min: value >= target - tolerance

    @property
    def ok(self) -> bool:
        if not np.isfinite(self.value):
            return False
        if self.kind == "min":
            return self.value >= self.target - self.tolerance
        return abs(self.value - self.target) <= self.tolerance

    @property
    def requirement(self) -> str:
        """What passing means, as printed: a band, or a floor for a one-sided check."""
        if self.kind == "min":
            return f">= {self.target - self.tolerance:g}"
        return f"{self.target:g} +/- {self.tolerance:g}"


def full_pool_slowdown(slowdowns: pd.DataFrame) -> pd.DataFrame:
    """Mean slowdown entirely on pool (spilled 100%) per workload (rows) and latency ratio (columns)."""
    full = slowdowns[at_full_pool(slowdowns["spilled_pct"])]
    return full.pivot_table(index="workload_id", columns="latency_ratio", values="slowdown_pct", aggfunc="mean")


def _ratio_col(table: pd.DataFrame, ratio: float) -> pd.Series:
    near = [c for c in table.columns if abs(float(c) - ratio) < 1e-6]
    return table[near[0]] if near else pd.Series(np.nan, index=table.index)


def lab_checks(workloads: pd.DataFrame, slowdowns: pd.DataFrame) -> list[Check]:
    s = full_pool_slowdown(slowdowns)
    a, b = _ratio_col(s, 1.82), _ratio_col(s, 2.22)
    pct = lambda m: float(100 * np.mean(m))
    out = [
        Check("lt1pct_at_182", pct(a < 1), 26, 6, "Pond §3.3 Fig. 5"),
        Check("1to5pct_at_182", pct((a >= 1) & (a < 5)), 17, 6, "Pond §3.3 Fig. 5"),
        Check("gt25pct_at_182", pct(a > 25), 21, 6, "Pond §3.3 Fig. 5"),
        Check("lt1pct_at_222", pct(b < 1), 23, 6, "Pond §3.3 Fig. 5"),
        Check("1to5pct_at_222", pct((b >= 1) & (b < 5)), 14, 6, "Pond §3.3 Fig. 5"),
        Check("gt25pct_at_222", pct(b > 25), 37, 6, "Pond §3.3 Fig. 5", kind="min"),
        Check("fine_at_182_still_lt5_at_222", pct(b[a < 1] < 5) if (a < 1).any() else np.nan, 100, 10,
              "Pond §3.3: workloads fine at 182% tend to be fine at 222%", kind="min"),
    ]
    meta = workloads.set_index("workload_id")
    cls = meta["workload_class"].reindex(s.index)
    by_cls = pd.DataFrame({"cls": cls, "s": a})
    span = by_cls.groupby("cls")["s"].agg(["min", "max"])
    has_both = (span["min"] < 5) & (span["max"] > 25)
    non_splash = has_both.drop(labels=["splash2x"], errors="ignore")
    out.append(Check("classes_with_lt5_and_gt25_share", pct(non_splash), 100, 35,
                     "Pond §3.3: every class but SPLASH2x has a workload <5% and one >25%", kind="min"))
    med = by_cls.groupby("cls")["s"].median()
    if "gapbs" in med:
        out.append(Check("gapbs_median_minus_all_median", float(med["gapbs"] - a.median()), 0, 0,
                         "Pond §3.3: GAPBS is generally worse", kind="min"))
    dram = tma_metrics(meta.reindex(s.index), "workloads")["tma_dram_bound"].to_numpy()
    out.append(Check("gt20pct_slowdown_at_lt3pct_dram_bound", float(np.sum((dram < 0.03) & (a > 20))), 2, 0,
                     "Pond Finding 4: >20% slowdown with ~2% DRAM bound", kind="min"))
    prop = a[cls == "proprietary"]
    if len(prop):
        out.append(Check("proprietary_lt1pct_count", float((prop < 1).sum()), 6, 3, "Pond §3.3 (6 of 13 <1%)"))
    spill = slowdowns[(slowdowns["spilled_pct"] > 0) & (slowdowns["spilled_pct"] <= 10)
                      & np.isclose(slowdowns["latency_ratio"], 1.82)]
    if len(spill):
        out.append(Check("mean_slowdown_spill_le10pct_at_182", float(spill["slowdown_pct"].mean()), 0, 2.5,
                         "Pond §6.2: a slightly misplaced zNUMA is nearly free"))
    return out


def fleet_checks(vms: pd.DataFrame, has_history: pd.Series | None = None) -> list[Check]:
    ended = vms[vms["untouched_fraction"].notna()]
    u = ended["untouched_fraction"]
    by_cluster = (u > 0.2).groupby(ended["cluster_id"]).mean()
    out = [
        Check("untouched_median_pct", float(100 * u.median()), 50, 6, "Pond §3.2 Fig. 6"),
        Check("vms_touching_lt50pct_share", float(100 * (u > 0.5).mean()), 50, 8, "Pond §3.2"),
        Check("min_cluster_share_gt20pct_untouched", float(100 * by_cluster.min()), 50, 0,
              "Pond §3.2: even the least-untouched cluster has >50% of VMs >20% untouched", kind="min"),
    ]
    if has_history is not None:
        out.append(Check("vms_with_history_pct", float(100 * has_history.mean()), 80, 8, "Pond §4.4 / §6.4"))
    return out


def shape_checks(vms: pd.DataFrame) -> list[Check]:
    """The fleet against the public Azure 2019 trace (docs/calibration.md, "Fleet shape"). A running VM counts as one that
    lives past every threshold (the trace's ~8% run for weeks)."""
    life_h = ((vms["deleted_at"] - vms["created_at"]).dt.total_seconds() / 3600).fillna(np.inf)
    src = "Azure Public Dataset V2 (docs/calibration.md, Fleet shape)"

    def pct(mask: pd.Series) -> float:
        return float(100 * mask.mean())
    return [
        Check("vms_with_2_vcpus_pct", pct(vms["vcpus"] == 2), 58.2, 6, src),
        Check("vms_over_24_vcpus_pct", pct(vms["vcpus"] > 24), 1.2, 1.5, src),
        Check("vms_up_to_8gb_pct", pct(vms["memory_gb"] <= 8), 61.4, 6, src),
        Check("vms_over_64gb_pct", pct(vms["memory_gb"] > 64), 3.6, 2, src),
        Check("life_under_30min_pct", pct(life_h < 0.5), 51.8, 5, src),
        Check("life_under_24h_pct", pct(life_h < 24), 89.1, 4, src),
    ]


def stranding_checks(levels: dict[int, dict[str, float]]) -> list[Check]:
    """Fig. 2a: the mean stranded share of the cluster-days near 75% and 85% of cores scheduled."""
    return [Check(f"stranded_at_{level}pct_cores_pct", v["mean_pct"], target, 2, "Pond §3.1 Fig. 2a")
            for (level, v), target in zip(sorted(levels.items()), (6.0, 10.0))]


def fig3_checks(savings: pd.DataFrame) -> list[Check]:
    """Fig. 3: a fixed 50% of every VM on the pool saves 12% of DRAM at 32 sockets, and grows little to 64."""
    half = savings[savings["share"] == 0.5].set_index("pool_sockets")["savings"] * 100
    return [Check("fig3_fixed50pct_at_32_sockets_pct", float(half.get(32, np.nan)), 12, 2, "Pond §3.1 Fig. 3"),
            Check("fig3_fixed50pct_growth_32_to_64_pts", float(half.get(64, np.nan) - half.get(32, np.nan)), 1, 1,
                  "Pond §3.1 Fig. 3: savings flatten (12% -> 13%)")]


def json_number(x: float) -> float | None:
    """A value for JSON: null where there is none (NaN is not JSON, and `dvc metrics` reads JSON)."""
    return round(float(x), 3) if np.isfinite(x) else None


def report(checks: list[Check]) -> dict:
    """Numbers and booleans only, so `dvc metrics show/diff` stay readable; sources live in the code."""
    return {"checks": {c.name: {"value": json_number(c.value), "target": c.target, "tolerance": c.tolerance,
                                "ok": c.ok} for c in checks},
            "passed": int(sum(c.ok for c in checks)), "total": len(checks)}
