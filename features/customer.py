"""Per-customer untouched-memory percentiles over a trailing window, without leakage.

The service refreshes these nightly, so a VM created on day D sees the snapshot taken at
00:00 UTC of D: VMs of the same customer *deleted* in [D - window, D). A VM that ends later
the same day (or is still running) is never counted, not even for VMs created after it ended:
training features are exactly what serving would have had.
"""

from __future__ import annotations

import pandas as pd

from pond.features.db import connect


def _quantiles_sql(percentiles: tuple[int, ...] | list[int]) -> str:
    return ", ".join(f"quantile_cont(u, {p / 100.0}) AS cust_p{p}" for p in percentiles)


def customer_percentiles(vms: pd.DataFrame, window_days: int, percentiles: tuple[int, ...] | list[int],
                         days: pd.DataFrame | None = None) -> pd.DataFrame:
    """Percentiles per (customer_id, day) as of 00:00 UTC of ``day``.

    Each ended VM is counted for the ``window_days`` days after its deletion day, so the work
    is linear in the number of VMs. ``days`` (customer_id, day) restricts the output.
    """
    con = connect()
    try:
        con.register("vms", vms[["customer_id", "deleted_at", "untouched_fraction"]])
        sql = f"""
        WITH ended AS (
            SELECT customer_id, untouched_fraction AS u,
                   CAST(timezone('UTC', deleted_at) AS DATE) AS end_day
            FROM vms WHERE deleted_at IS NOT NULL AND untouched_fraction IS NOT NULL
        ), spread AS (
            SELECT customer_id, u, end_day + CAST(k AS INTEGER) AS day
            FROM ended, range(1, {int(window_days) + 1}) t(k)
        )
        SELECT customer_id, day, count(*) AS cust_n, {_quantiles_sql(percentiles)}
        FROM spread GROUP BY customer_id, day
        """
        if days is not None:
            con.register("wanted", days[["customer_id", "day"]].drop_duplicates())
            sql = f"SELECT p.* FROM ({sql}) p JOIN wanted w USING (customer_id, day)"
        out = con.sql(sql).df()
    finally:
        con.close()
    out["day"] = pd.to_datetime(out["day"]).dt.date
    out["cust_n"] = out["cust_n"].astype("int64")
    return out


def creation_day(created_at: pd.Series) -> pd.Series:
    return created_at.dt.tz_convert("UTC").dt.date


def attach_customer_features(vms: pd.DataFrame, window_days: int,
                             percentiles: tuple[int, ...] | list[int]) -> pd.DataFrame:
    """``vms`` plus ``day`` and the customer percentiles each VM would have been served with."""
    out = vms.copy()
    out["day"] = creation_day(out["created_at"])
    table = customer_percentiles(vms, window_days, percentiles, days=out[["customer_id", "day"]])
    out = out.merge(table, on=["customer_id", "day"], how="left", validate="many_to_one")
    out["cust_n"] = out["cust_n"].fillna(0).astype("int64")
    return out
