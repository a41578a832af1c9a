"""Reading and atomically writing contract tables and other pipeline files."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from core.errors import ContractError
from telemetry.contract import TABLES, validate_tables


def find_table(directory: Path, table: str) -> Path | None:
    for suffix in (".parquet", ".csv", ".csv.gz"):
        path = directory / f"{table}{suffix}"
        if path.exists():
            return path
    return None


def read_raw(path: Path) -> pd.DataFrame:
    if path.name.endswith(".parquet"):
        return pd.read_parquet(path)
    return pd.read_csv(path, dtype_backend="numpy_nullable", low_memory=False)


def read_tables(directory: Path | str, tables: Iterable[str] = TABLES, *,
                validate: bool = True) -> dict[str, pd.DataFrame]:
    """Read contract tables (Parquet or CSV) from ``directory``; validated unless told otherwise."""
    directory = Path(directory)
    out: dict[str, pd.DataFrame] = {}
    for table in tables:
        path = find_table(directory, table)
        if path is None:
            raise ContractError(table, f"no {table}.parquet or {table}.csv in {directory}",
                                fix="run `pond generate` or `pond import DIR` first")
        out[table] = read_raw(path)
    return validate_tables(out) if validate else out


def _replace_dir(tmp: Path, target: Path) -> None:
    """Swap ``tmp`` into ``target`` so readers see the old or the new directory, never half of one."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class AtomicDir:
    """Context manager yielding a temp dir that replaces ``target`` only if the block succeeds."""

    def __init__(self, target: Path | str) -> None:
        self.target = Path(target)

    def __enter__(self) -> Path:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.tmp-", dir=self.target.parent))
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            _replace_dir(self.tmp, self.target)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def write_tables(directory: Path | str, tables: dict[str, pd.DataFrame]) -> None:
    """Write tables as Parquet into ``directory``, replacing it whole."""
    with AtomicDir(directory) as tmp:
        for name, df in tables.items():
            df.to_parquet(tmp / f"{name}.parquet", index=False)


def write_atomic(path: Path | str, data: bytes | str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path | str, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=float) + "\n")
