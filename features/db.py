"""One place that opens DuckDB, with a memory cap so fleet-sized joins spill instead of growing."""

from __future__ import annotations

import duckdb

from pond.core.runtime import Runtime


def connect() -> duckdb.DuckDBPyConnection:
    """``POND_DUCKDB_TEMP``: where joins past the cap spill (DuckDB's default, ``.tmp`` in the working
    directory, when unset); a fleet-sized join can spill tens of GB."""
    env = Runtime.now()
    config = {"memory_limit": env.duckdb_memory, "preserve_insertion_order": False}
    if env.duckdb_temp:
        config["temp_directory"] = env.duckdb_temp
    return duckdb.connect(config=config)
