"""The features stage as pure functions: lab features, per-VM features and the online snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from features.customer import attach_customer_features, customer_percentiles, percentile_columns
from features.history import KEY, history_counts, workload_history
from features.tma import pmu_features
from telemetry.contract import WORKLOADS, event_columns
from telemetry.errors import ConfigError

VM_META = ["vm_id", "customer_id", "cluster_id", "region", "vm_type", "vcpus", "memory_gb", "os",
           "created_at", "deleted_at"]


@dataclass(frozen=True)
class FeatureParams:
    as_of: str                      # last day of data the snapshot may use (ISO date)
    window_days: int = 7
    percentiles: tuple[int, ...] = (50, 80, 90, 95, 99)
    history_days: int = 28
    counter_delay_s: int = 3600     # counters cover the first hour of a VM
    min_history_vms: int = 1

    def __post_init__(self) -> None:
        try:
            pd.Timestamp(self.as_of)
        except ValueError:
            raise ConfigError(f"base.as_of={self.as_of!r} is not a date; write it as YYYY-MM-DD") from None
        for name in ("window_days", "history_days", "min_history_vms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"features.{name} must be >= 1, got {getattr(self, name)}")
        if not all(0 < q < 100 for q in self.percentiles):
            raise ConfigError(f"features.percentiles must lie in (0, 100), got {list(self.percentiles)}")

    @property
    def snapshot_time(self) -> pd.Timestamp:
        """Midnight after the as-of day: what the service holds while serving the next day."""
        return pd.Timestamp(self.as_of, tz="UTC").normalize() + pd.Timedelta(days=1)


def lab_features(workloads: pd.DataFrame) -> pd.DataFrame:
    events = event_columns(workloads, WORKLOADS)
    feats = pmu_features(workloads, events, table="workloads")
    return pd.concat([workloads[["workload_id", "workload_class", "footprint_gb"]], feats], axis=1)


def vm_features(vms: pd.DataFrame, counters: pd.DataFrame | str | Path, p: FeatureParams) -> pd.DataFrame:
    """One row per VM: metadata, the customer percentiles and history it would have been served with."""
    out = attach_customer_features(vms[VM_META + ["untouched_fraction", "workload_id"]],
                                   p.window_days, p.percentiles)
    hist = history_counts(vms, counters, p.history_days, p.counter_delay_s)
    out = out.merge(hist, on="vm_id", how="left", validate="one_to_one")
    out["history_vms"] = out["history_vms"].fillna(0).astype("int64")
    out["has_history"] = out["history_vms"] >= p.min_history_vms
    cols = percentile_columns(p.percentiles)
    out[cols[1:]] = out[cols[1:]].astype(np.float32)
    return out


def snapshot(vms: pd.DataFrame, counters: pd.DataFrame | str | Path, events: list[str],
             p: FeatureParams) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(customer percentiles, workload history) as the service holds them after the as-of day."""
    day = p.snapshot_time.date()
    customers = pd.DataFrame({"customer_id": vms["customer_id"].unique(), "day": day})
    cust = customer_percentiles(vms, p.window_days, p.percentiles, days=customers)
    cust = cust.drop(columns="day").sort_values("customer_id").reset_index(drop=True)
    hist = workload_history(vms, counters, events, p.snapshot_time, p.history_days, p.counter_delay_s)
    hist = hist[hist["n_vms"] >= p.min_history_vms].reset_index(drop=True)
    return cust, hist


def summary(vm_feats: pd.DataFrame, cust: pd.DataFrame, hist: pd.DataFrame) -> dict[str, float]:
    ended = vm_feats["untouched_fraction"].notna()
    return {
        "vms": int(len(vm_feats)),
        "vms_with_history_share": float(vm_feats["has_history"].mean()),
        "vms_with_customer_percentiles_share": float((vm_feats["cust_n"] > 0).mean()),
        "untouched_median": float(vm_feats.loc[ended, "untouched_fraction"].median()),
        "snapshot_customers": int(len(cust)),
        "snapshot_history_keys": int(len(hist)),
    }


__all__ = ["FeatureParams", "KEY", "lab_features", "vm_features", "snapshot", "summary"]
