"""The project's one exception hierarchy.

Every message says what was wrong *and* how to fix it, because the reader is an operator
looking at a failed nightly job, not the author of the code.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path


class PondError(Exception):
    """Base class of every error this project raises on purpose."""


class ContractError(PondError):
    """Input tables do not follow the telemetry contract (docs/design.md)."""

    def __init__(self, table: str, problem: str, *, column: str | None = None,
                 rows: list | None = None, fix: str = "") -> None:
        self.table, self.problem, self.column, self.rows, self.fix = table, problem, column, rows or [], fix
        where = f"table '{table}'" + (f", column '{column}'" if column else "")
        shown = ""
        if self.rows:
            head = ", ".join(str(r) for r in self.rows[:5])
            shown = f" (first offending rows: {head}{', ...' if len(self.rows) > 5 else ''})"
        super().__init__(f"{where}: {problem}{shown}." + (f" Fix: {fix}" if fix else ""))

    def __reduce__(self) -> tuple:
        # a Dask worker's error reaches the stage's process pickled: rebuild it from its fields
        return _contract_error, (self.table, self.problem, self.column, self.rows, self.fix)


def _contract_error(table: str, problem: str, column: str | None, rows: list, fix: str) -> ContractError:
    return ContractError(table, problem, column=column, rows=rows, fix=fix)


class ConfigError(PondError):
    """A parameter or setting is missing or out of range."""


class TooLittleHistory(ConfigError):
    """A night with too few days of telemetry before it to train on (`backtest` skips such nights at the start of a
    short trace; `train_um` alone stops on it)."""


class InputFormatError(PondError):
    """A file in a real external format (perf stat, Azure vmtable) cannot be parsed."""


class ModelError(PondError):
    """A model artifact is missing, corrupt, or does not match what the policy expects."""


class RegistryError(PondError):
    """The model registry (MLflow) failed or answered something unexpected: nothing was promoted."""


def resource_error(exc: BaseException) -> str | None:
    """What ran out, and how to fix it, when ``exc`` is Python's or DuckDB's running out of memory or
    of disk to spill to; None for any other error. duckdb is looked up, not imported: the service's
    install has none."""
    duckdb = sys.modules.get("duckdb")
    text = str(exc).strip()
    first = text.splitlines()[0][:200] if text else type(exc).__name__
    spilling = duckdb is not None and isinstance(exc, (duckdb.IOException, duckdb.OutOfMemoryException)) and (
        "No space left on device" in text or "max_temp_directory_size" in text)
    if spilling:
        return (f"out of disk space ({first}). DuckDB spills joins past POND_DUCKDB_MEMORY to POND_DUCKDB_TEMP "
                "(default: .tmp in the working directory), up to 90% of that disk's free space. Fix: point "
                "POND_DUCKDB_TEMP at a larger disk, raise POND_DUCKDB_MEMORY, or set engine.backend: dask")
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        if not exc.filename:
            return (f"out of disk space ({first}); the writer did not say where. Fix: free space on the disk of the "
                    "stage's outputs (`df -h data`), or write them to another one")
        return (f"out of disk space writing {exc.filename} ({first}). Fix: free space on the disk that holds it "
                f"(`df -h {Path(exc.filename).parent}`), or write the outputs to another one")
    if isinstance(exc, MemoryError) or (duckdb is not None and isinstance(exc, duckdb.OutOfMemoryException)):
        return (f"out of memory ({first}). Fix: raise POND_DUCKDB_MEMORY (default 2GB), run on a machine with more "
                "memory, or set engine.backend: dask")
    return None


def name_full_disk(exc: BaseException, path: Path | str) -> None:
    """Raise a full disk met while writing ``path`` again with the path in it: parquet's, CSV's and plain
    file writes say only "No space left on device" (errno 28, no file name), which left an operator searching."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC and not exc.filename:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from exc
