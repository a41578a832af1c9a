"""One place that opens DuckDB, with a memory cap so fleet-sized joins spill instead of growing."""

from __future__ import annotations

import os

import duckdb


def connect() -> duckdb.DuckDBPyConnection:
    limit = os.environ.get("POND_DUCKDB_MEMORY", "2GB")
    return duckdb.connect(config={"memory_limit": limit, "preserve_insertion_order": False})
