"""One place that opens DuckDB, with a memory cap so fleet-sized joins spill instead of growing."""

from __future__ import annotations

import os

import duckdb


def connect() -> duckdb.DuckDBPyConnection:
    """``POND_DUCKDB_TEMP``: where joins past the cap spill (DuckDB's default, ``.tmp`` in the working
    directory, when unset); a fleet-sized join can spill tens of GB."""
    config = {"memory_limit": os.environ.get("POND_DUCKDB_MEMORY", "2GB"), "preserve_insertion_order": False}
    if os.environ.get("POND_DUCKDB_TEMP"):
        config["temp_directory"] = os.environ["POND_DUCKDB_TEMP"]
    return duckdb.connect(config=config)
