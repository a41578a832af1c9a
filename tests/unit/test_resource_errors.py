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


def test_a_full_disk_is_named_by_the_path_being_written(tmp_path):
    """Parquet, CSV and plain writes raise errno 28 with no file name: the atomic writers add the path."""
    from pond.core.errors import name_full_disk

    bare = OSError(errno.ENOSPC, "No space left on device")
    assert "the writer did not say where" in resource_error(bare)
    with pytest.raises(OSError) as got:
        name_full_disk(bare, tmp_path / "out.parquet")
    assert got.value.filename == str(tmp_path / "out.parquet") and got.value.__cause__ is bare
    assert f"writing {tmp_path / 'out.parquet'}" in resource_error(got.value)
    assert f"df -h {tmp_path}" in resource_error(got.value)
    name_full_disk(OSError(errno.ENOENT, "No such file or directory"), tmp_path)   # other errors pass through


@pytest.fixture()
def full_disk(tmp_path):
    """A 64 KiB tmpfs: a disk that really fills up (needs root and a mount namespace that allows it)."""
    import subprocess

    mount = tmp_path / "full"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                      capture_output=True, check=False).returncode != 0:
        pytest.skip("this machine does not let the test mount a small file system")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_stage_that_fills_the_disk_names_the_path_and_leaves_nothing(full_disk, capsys):
    out = full_disk / "telemetry"
    assert run_pond(["--quiet", "template", str(out), "--days", "3", "--vms-per-day", "100"]) == 3
    err = capsys.readouterr().err
    assert f"out of disk space writing {out} " in err and f"df -h {full_disk}" in err, err
    assert list(full_disk.iterdir()) == []          # no half-written folder, no temp copy left behind


def test_write_atomic_on_a_full_disk_names_its_file(full_disk):
    from pond.telemetry.atomic import write_atomic

    with pytest.raises(OSError) as got:
        write_atomic(full_disk / "policy.json", b"x" * 200_000)
    assert got.value.errno == errno.ENOSPC and got.value.filename == str(full_disk / "policy.json")
    assert list(full_disk.iterdir()) == []
