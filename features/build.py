"""The features stage as pure functions: lab features, per-VM features and the online snapshot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from features.customer import attach_customer_features, customer_percentiles, percentile_columns
from features.history import KEY, history_counts, workload_history
from features.tma import pmu_features
from telemetry.contract import WORKLOADS, event_columns
from telemetry.errors import ConfigError

REQUEST_SHAPE = ["customer_id", "vm_type", "vcpus", "memory_gb", "os", "region", "cluster_id"]
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
    request_shapes: int = 50_000    # distinct recent requests the service predicts when it loads

    def __post_init__(self) -> None:
        try:
            pd.Timestamp(self.as_of)
        except ValueError:
            raise ConfigError(f"base.as_of={self.as_of!r} is not a date; write it as YYYY-MM-DD") from None
        for name in ("window_days", "history_days", "min_history_vms", "request_shapes"):
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


def request_shapes(vms: pd.DataFrame, p: FeatureParams) -> pd.DataFrame:
    """The distinct requests (UM inputs) of VMs created in the ``window_days`` before the snapshot,
    most frequent first, with their count.

    VMs are deployed in groups and customers repeat their sizes; the service predicts these shapes
    once when it loads so that a repeat costs a look-up (serving.engine). Only VMs created before
    the snapshot time are used: the same information the service holds.
    """
    created = vms["created_at"].dt.tz_convert("UTC")
    end = p.snapshot_time
    recent = vms.loc[(created < end) & (created >= end - pd.Timedelta(days=p.window_days)), REQUEST_SHAPE]
    counts = recent.groupby(REQUEST_SHAPE, dropna=False, sort=False).size().rename("vms").reset_index()
    counts = counts.sort_values(["vms", *REQUEST_SHAPE], ascending=[False] + [True] * len(REQUEST_SHAPE),
                                kind="stable", na_position="last")
    return counts.head(p.request_shapes).reset_index(drop=True)


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


__all__ = ["FeatureParams", "KEY", "REQUEST_SHAPE", "lab_features", "request_shapes", "snapshot", "summary",
           "vm_features"]
