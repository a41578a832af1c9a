"""The features stage as pure functions: lab features, per-VM features and the online snapshot."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pond.core.params import FeatureParams, percentile_columns
from pond.features.customer import attach_customer_features, customer_percentiles
from pond.features.history import KEY, history_counts, workload_history
from pond.features.tma import pmu_features
from pond.telemetry import request
from pond.telemetry.contract import WORKLOADS, event_columns
from pond.telemetry.storage import Location
from pond.telemetry.vm_types import family_of, generation_of, parse_counts

VM_META = [*request.FIELDS, "created_at", "deleted_at"]


def lab_features(workloads: pd.DataFrame) -> pd.DataFrame:
    events = event_columns(workloads, WORKLOADS)
    feats = pmu_features(workloads, events, table="workloads")
    return pd.concat([workloads[["workload_id", "workload_class", "footprint_gb"]], feats], axis=1)


def vm_features(vms: pd.DataFrame, counters: pd.DataFrame | str | Location, p: FeatureParams) -> pd.DataFrame:
    """One row per VM: metadata, the customer percentiles and history it would have been served with."""
    out = attach_customer_features(vms.reindex(columns=VM_META + ["untouched_fraction", "untouched_so_far", "workload_id"]),
                                   p.window_days, p.percentiles)
    hist = history_counts(vms, counters, p.history_days, p.counter_delay_s)
    out = out.merge(hist, on="vm_id", how="left", validate="one_to_one")
    out["history_vms"] = out["history_vms"].fillna(0).astype("int64")
    out["has_history"] = out["history_vms"] >= p.min_history_vms
    cols = percentile_columns(p.percentiles)
    out[cols[1:]] = out[cols[1:]].astype(np.float32)
    return out


def snapshot(vms: pd.DataFrame, counters: pd.DataFrame | str | Location, events: list[str],
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
    return top_shapes([shape_counts(vms, p)], p)


def shape_counts(vms: pd.DataFrame, p: FeatureParams) -> pd.DataFrame:
    """The count of every request shape created in the window before the snapshot (any part of the fleet)."""
    created, end, shape = vms["created_at"].dt.tz_convert("UTC"), p.snapshot_time, list(request.SHAPE)
    recent = vms.loc[(created < end) & (created >= end - pd.Timedelta(days=p.window_days)), shape]
    return recent.groupby(shape, dropna=False, sort=False).size().rename("vms").reset_index()


def top_shapes(counts: list[pd.DataFrame], p: FeatureParams) -> pd.DataFrame:
    """The ``request_shapes`` most frequent shapes of the parts' counts added up."""
    shape = list(request.SHAPE)
    c = pd.concat(counts, ignore_index=True).groupby(shape, dropna=False, sort=False)["vms"].sum().reset_index()
    c = c.sort_values(["vms", *shape], ascending=[False] + [True] * len(shape), kind="stable", na_position="last")
    return c.head(p.request_shapes).reset_index(drop=True)


def facts(vm_feats: pd.DataFrame, customer_columns: list[str]) -> dict[str, Any]:
    """What ``summary`` and ``empty_inputs`` need from VM features, in a form that adds up over parts
    of the fleet (``merge_facts``): the dask engine never holds the whole table in one process."""
    ended = vm_feats["untouched_fraction"].notna()
    return {"vms": len(vm_feats), "vm_type_counts": vm_feats["vm_type"].astype(str).value_counts(),
            "vm_types": pd.Series(vm_feats["vm_type"].unique()),
            "with_history": int(vm_feats["has_history"].sum()),
            "with_customer": int((vm_feats["cust_n"] > 0).sum()),
            "untouched_ended": vm_feats.loc[ended, "untouched_fraction"].to_numpy(),
            "no_cluster": bool(vm_feats["cluster_id"].isna().all()),
            "no_customer": {c: bool(vm_feats[c].isna().all()) for c in customer_columns[1:]}}


def merge_facts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The facts of the union of the parts' VMs."""
    return {"vms": sum(f["vms"] for f in parts),
            "vm_type_counts": pd.concat([f["vm_type_counts"] for f in parts]).groupby(level=0, sort=False).sum(),
            "vm_types": pd.Series(pd.unique(pd.concat([f["vm_types"] for f in parts], ignore_index=True))),
            "with_history": sum(f["with_history"] for f in parts),
            "with_customer": sum(f["with_customer"] for f in parts),
            "untouched_ended": np.concatenate([f["untouched_ended"] for f in parts]),
            "no_cluster": all(f["no_cluster"] for f in parts),
            "no_customer": {c: all(f["no_customer"][c] for f in parts) for c in parts[0]["no_customer"]}}


def empty_inputs(vm_feats: pd.DataFrame | dict[str, Any], customer_columns: list[str]) -> dict[str, str]:
    """Model inputs that carry nothing for a whole table, each with the likely reason. They are
    warnings: the models treat missing values as such, but a night that learns nothing from an
    input should say so rather than train quietly without it."""
    f = facts(vm_feats, customer_columns) if isinstance(vm_feats, pd.DataFrame) else vm_feats
    if not f["vms"]:
        return {}
    types = f["vm_types"]
    out = {}
    if types.map(family_of).isna().all():
        out["family"] = out["generation"] = "no vm_type is in a known naming scheme (telemetry.vm_types)"
    elif types.map(generation_of).isna().all():
        out["generation"] = "no vm_type names a generation"
    if f["no_cluster"]:
        out["cluster_id"] = "no VM has a cluster_id"
    for c in customer_columns[1:]:
        if f["no_customer"][c]:
            out[c] = "no customer had VMs that ended within features.window_days"
    if not f["with_history"]:
        out["workload history"] = "no VM had earlier VMs with counters under its (customer, vm_type, region)"
    return out


def summary(vm_feats: pd.DataFrame | dict[str, Any], cust: pd.DataFrame, hist: pd.DataFrame,
            customer_columns: list[str]) -> dict[str, float]:
    """The stage's metrics, from the VM features or their ``facts``."""
    f = facts(vm_feats, customer_columns) if isinstance(vm_feats, pd.DataFrame) else vm_feats
    n = f["vms"]
    return {
        **parse_counts(f["vm_type_counts"]),
        "empty_inputs": len(empty_inputs(f, customer_columns)),
        "vms": int(n),
        "vms_with_history_share": f["with_history"] / n if n else float("nan"),
        "vms_with_customer_percentiles_share": f["with_customer"] / n if n else float("nan"),
        "untouched_median": float(pd.Series(f["untouched_ended"], dtype="float64").median()),
        "snapshot_customers": len(cust),
        "snapshot_history_keys": len(hist),
    }


__all__ = [
    "KEY",
    "FeatureParams",
    "empty_inputs",
    "facts",
    "lab_features",
    "merge_facts",
    "request_shapes",
    "snapshot",
    "summary",
    "vm_features",
]
