"""Running out of memory or of disk is a clear error with its fix (exit code 3), never a traceback."""

from __future__ import annotations

import errno

import duckdb
import pytest

from pond.core.errors import resource_error
from pond.features.db import connect
from tests.conftest import run_pond


@pytest.mark.parametrize("exc, says", [
    (MemoryError(), "out of memory"),
    (duckdb.OutOfMemoryException("could not allocate block of size 256 KiB"), "raise POND_DUCKDB_MEMORY"),
    (duckdb.IOException('IO Error: Could not write file ".tmp/duckdb_temp_1.tmp": No space left on device'),
     "point POND_DUCKDB_TEMP at a larger disk"),
    (OSError(errno.ENOSPC, "No space left on device", "data/features/vm_features.parquet"),
     "out of disk space writing data/features/vm_features.parquet"),
    (duckdb.OutOfMemoryException("Out of Memory Error: failed to offload data block of size 256.0 KiB (134.8 "
                                 "MiB/135.0 MiB used).\nThis limit was set by the 'max_temp_directory_size' setting."),
     "out of disk space (Out of Memory Error: failed to offload"),
])
def test_running_out_is_named_with_its_fix(exc, says):
    assert says in resource_error(exc)


def test_other_errors_are_not_taken_for_running_out():
    assert resource_error(duckdb.IOException("IO Error: No files found that match the pattern")) is None
    assert resource_error(OSError(errno.ENOENT, "No such file or directory")) is None
    assert resource_error(ValueError("bad")) is None


def test_a_stage_that_runs_out_of_disk_exits_3_with_the_fix(monkeypatch, capsys):
    from pond.core import params

    def full(*args, **kwargs):
        raise duckdb.IOException('IO Error: Could not write file ".tmp/duckdb_temp_9.tmp": No space left on device')

    monkeypatch.setattr(params, "load", full)     # the first thing a stage does, made to run out of disk
    assert run_pond(["--quiet", "features"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("pond features: error: out of disk space") and "POND_DUCKDB_TEMP" in err


def test_duckdb_spills_where_it_is_told(monkeypatch, tmp_path):
    monkeypatch.setenv("POND_DUCKDB_TEMP", str(tmp_path / "spill"))
    monkeypatch.setenv("POND_DUCKDB_MEMORY", "512MB")
    got = connect().execute("select current_setting('temp_directory'), current_setting('memory_limit')").fetchone()
    assert got[0] == str(tmp_path / "spill") and got[1].startswith("488")
