"""Workload history keyed by (customer_id, vm_type, region): the PMU summary of earlier VMs.

A VM's counters describe its first ``delay`` of runtime, so they exist from
``created_at + delay`` on. The service loads history nightly: a VM created on day D may use the
VMs whose counters became available in [D - history_days, D). Counts are summed over those VMs
before TMA metrics are taken, which weights each VM by its run length.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from pond.core.days import day_of
from pond.features.db import connect
from pond.features.tma import pmu_features
from pond.telemetry.io import parquet_glob
from pond.telemetry.request import HISTORY_KEY
from pond.telemetry.storage import Location, is_url, location

KEY = HISTORY_KEY


def _register(con: duckdb.DuckDBPyConnection, name: str, obj: pd.DataFrame | str | Location) -> None:
    if isinstance(obj, pd.DataFrame):
        con.register(name, obj)
        return
    path = location(obj)
    if is_url(path):   # DuckDB reads the URL through the same fsspec filesystem as pandas and pyarrow
        con.register_filesystem(path.fs)
    glob = parquet_glob(path).replace("'", "''")
    con.sql(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{glob}', hive_partitioning = false)")


def _available(delay_s: int) -> str:
    return f"CAST(timezone('UTC', v.created_at + to_seconds({int(delay_s)})) AS DATE)"


def history_counts(vms: pd.DataFrame, counters: pd.DataFrame | str | Location,
                   history_days: int, delay_s: int) -> pd.DataFrame:
    """Per VM: how many earlier VMs of its key the nightly history held (``history_vms``)."""
    con = connect()
    try:
        con.register("vms", vms[["vm_id", *KEY, "created_at"]])
        _register(con, "counters", counters)
        on = " AND ".join(f"t.{k} = c.{k}" for k in KEY)
        out = con.sql(f"""
        WITH daily AS (
            SELECT v.customer_id, v.vm_type, v.region, {_available(delay_s)} AS aday, count(*) AS n
            FROM vms v SEMI JOIN counters k ON v.vm_id = k.vm_id
            GROUP BY ALL
        ), cum AS (
            SELECT *, sum(n) OVER (PARTITION BY customer_id, vm_type, region ORDER BY aday
                                   ROWS UNBOUNDED PRECEDING) AS total
            FROM daily
        ), targets AS (
            SELECT vm_id, customer_id, vm_type, region,
                   CAST(timezone('UTC', created_at) AS DATE) AS day FROM vms
        ), upto AS (
            SELECT t.vm_id, t.customer_id, t.vm_type, t.region, t.day, coalesce(c.total, 0) AS upto
            FROM targets t ASOF LEFT JOIN cum c ON {on} AND t.day > c.aday
        )
        SELECT t.vm_id, CAST(t.upto - coalesce(c.total, 0) AS BIGINT) AS history_vms
        FROM upto t ASOF LEFT JOIN cum c ON {on} AND t.day - {int(history_days)} > c.aday
        """).df()
    finally:
        con.close()
    return out


def workload_history(vms: pd.DataFrame, counters: pd.DataFrame | str | Location, events: list[str],
                     as_of: pd.Timestamp, history_days: int, delay_s: int) -> pd.DataFrame:
    """History table as the service holds it at ``as_of`` (a UTC midnight): key, n_vms, features."""
    con = connect()
    try:
        con.register("vms", vms[["vm_id", *KEY, "created_at"]])
        _register(con, "counters", counters)
        sums = ", ".join(f'sum(k."{e}") AS "{e}"' for e in events)
        day = day_of(as_of)
        summed = con.execute(f"""
            SELECT v.customer_id, v.vm_type, v.region, count(*) AS n_vms, {sums}
            FROM vms v JOIN counters k ON v.vm_id = k.vm_id
            WHERE {_available(delay_s)} < ?::DATE
              AND {_available(delay_s)} >= ?::DATE - {int(history_days)}
            GROUP BY ALL ORDER BY v.customer_id, v.vm_type, v.region
        """, [day, day]).df()
    finally:
        con.close()
    feats = pmu_features(summed, events, table="vm_counters")
    return pd.concat([summed[[*KEY, "n_vms"]], feats], axis=1)


def own_counts(vm_ids: pd.Series, counters: pd.DataFrame | str | Location,
               events: list[str] | None = None) -> pd.DataFrame:
    """Each VM's own first-hour counts, indexed by ``vm_id`` (sorted). VMs without counters are absent; a VM with
    several rows (an export that split its window) has them summed, as a history sums its VMs'. ``events``: only
    those of them the table counts (a Parquet scan then decodes no other column: the QoS monitor reads 12 of 134);
    None: every one."""
    con = connect()
    try:
        con.register("wanted", pd.DataFrame({"vm_id": pd.Series(vm_ids, dtype=object).astype(str).unique()}))
        _register(con, "counters", counters)
        columns = "k.*"
        if events is not None:
            counted = {c for c, in con.execute("SELECT column_name FROM (DESCRIBE counters)").fetchall()}
            quoted = ['"' + e.replace('"', '""') + '"' for e in dict.fromkeys(events) if e in counted]
            columns = ", ".join(["k.vm_id", *(f"k.{q}" for q in quoted)])
        own = con.execute(
            f"SELECT {columns} FROM counters k JOIN wanted w ON CAST(k.vm_id AS VARCHAR) = w.vm_id").df()
    finally:
        con.close()
    events = [c for c in own.columns if c != "vm_id"]
    return own.assign(vm_id=own["vm_id"].astype(str)).groupby("vm_id", sort=True)[events].sum(min_count=1)


def own_features(vm_ids: pd.Series, counters: pd.DataFrame | str | Location) -> pd.DataFrame:
    """Each VM's own first-hour counters (``own_counts``) as the LI model's features (``pmu_features``), indexed by
    ``vm_id``: what the QoS monitor (``/v1/qos``) sees of a VM once its first window has run."""
    own = own_counts(vm_ids, counters)
    return pmu_features(own.reset_index(drop=True), list(own.columns), table="vm_counters").set_index(
        own.index.to_numpy())
