"""Import under files broken in ways our generator never breaks them: one line naming the table
and the file, exit 2, and the data already imported left exactly as it was."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from pond.evaluation.readiness import check
from pond.telemetry.contract import TABLES
from pond.telemetry.io import read_tables
from tests.conftest import run_pond


@pytest.fixture()
def src(tmp_path, small_raw):
    d = tmp_path / "export"
    d.mkdir()
    for t in TABLES:
        shutil.copy2(small_raw / f"{t}.parquet", d / f"{t}.parquet")
    return d


@pytest.fixture(scope="module")
def imported(tmp_path_factory, small_raw):
    """`pond import` of the small fleet, run once: each test gets a copy (an import takes seconds)."""
    d = tmp_path_factory.mktemp("imported") / "raw"
    assert run_pond(["import", str(small_raw), "--out", str(d)]) == 0
    return d


@pytest.fixture()
def out(tmp_path, imported):
    """A data set already imported: it must survive every failed import untouched."""
    d = tmp_path / "raw"
    shutil.copytree(imported, d)
    return d


def _snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _refused(src, out, capsys, *fragments):
    before = _snapshot(out)
    assert run_pond(["import", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in err, err
    assert _snapshot(out) == before
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".raw")]
    return err


def _as_csv(src, table):
    df = pd.read_parquet(src / f"{table}.parquet")
    (src / f"{table}.parquet").unlink()
    return df


BROKEN_FILES = {
    "0-byte parquet": lambda s: (s / "vms.parquet").write_bytes(b""),
    "garbage parquet": lambda s: (s / "vms.parquet").write_bytes(np.random.default_rng(0).bytes(4096)),
    "truncated parquet": lambda s: (s / "vms.parquet").write_bytes((s / "vms.parquet").read_bytes()[:5000]),
    "0-byte csv": lambda s: (_as_csv(s, "vms"), (s / "vms.csv").write_bytes(b"")),
    "a directory": lambda s: ((s / "vms.parquet").unlink(), (s / "vms.parquet").mkdir(),
                              (s / "vms.parquet" / "x").write_text("?")),
    "latin-1 csv": lambda s: (s / "vms.csv").write_bytes(
        _as_csv(s, "vms").assign(os="Linux \xe9dition").to_csv(index=False).encode("latin-1")),
}


@pytest.mark.parametrize("case", ["0-byte parquet", "garbage parquet", "truncated parquet", "0-byte csv",
                                  "a directory", "latin-1 csv"])
def test_unreadable_files_are_one_line_errors(src, out, capsys, case):
    BROKEN_FILES[case](src)
    _refused(src, out, capsys, "table 'vms'", "cannot read", str(src / "vms."))


def test_a_row_with_an_extra_field(src, out, capsys):
    text = _as_csv(src, "vms").to_csv(index=False).splitlines()
    text[4] += ",surplus"
    (src / "vms.csv").write_text("\n".join(text) + "\n")
    _refused(src, out, capsys, "table 'vms'", "a row does not match the header")


def test_an_empty_table_is_refused(src, out, capsys):
    _as_csv(src, "vm_counters").head(0).to_csv(src / "vm_counters.csv", index=False)
    _refused(src, out, capsys, "table 'vm_counters'", "has no rows")


def test_one_table_is_not_an_import(src, out, capsys):
    for t in ("workloads", "slowdowns", "vm_counters"):
        (src / f"{t}.parquet").unlink()
    _refused(src, out, capsys, "a full import needs all of", "--partial")


def test_partial_replaces_only_the_tables_given_and_validates_the_whole(src, out, small_raw, capsys):
    slow = pd.read_parquet(small_raw / "slowdowns.parquet")
    only = src / "only"
    only.mkdir()
    slow[slow.repetition == 0].to_csv(only / "slowdowns.csv", index=False)
    assert run_pond(["import", str(only), "--out", str(out), "--partial"]) == 0
    t = read_tables(out)
    assert (t["slowdowns"].repetition == 0).all() and len(t["vms"]) == len(pd.read_parquet(small_raw / "vms.parquet"))
    # a partial table that breaks the whole set (slowdowns of unknown workloads) is refused
    slow.assign(workload_id="nobody/measured").to_csv(only / "slowdowns.csv", index=False)
    before = _snapshot(out)
    assert run_pond(["import", str(only), "--out", str(out), "--partial"]) == 2
    assert "unknown workloads" in capsys.readouterr().err and _snapshot(out) == before


def _set(table, column, value, rows=slice(3, 4)):
    def apply(s):
        df = pd.read_parquet(s / f"{table}.parquet")
        df[column] = df[column].astype(object)
        df.loc[df.index[rows], column] = value
        (s / f"{table}.parquet").unlink()
        df.to_csv(s / f"{table}.csv", index=False)
    return apply


@pytest.mark.parametrize("table, column, value, fragment", [
    ("vms", "memory_gb", float("inf"), "memory_gb must be a finite number"),
    ("vms", "memory_gb", 1e300, "memory_gb must be a finite number"),
    ("vms", "vcpus", 1e15, "vcpus must be a whole number in [1, 1024]"),
    ("workloads", "footprint_gb", float("inf"), "footprint_gb must lie in (0, 65536"),
    ("slowdowns", "latency_ratio", float("inf"), "latency_ratio must lie in [1, 10]"),
    ("slowdowns", "slowdown_pct", -250.0, "slowdown_pct must lie in (-100"),
    ("vm_counters", "CPU_CLK_UNHALTED.THREAD", float("inf"), "counter values exceed"),
    ("vms", "created_at", "1767225600", "timestamps are numbers"),
    ("vms", "created_at", "1600-01-01T00:00:00Z", "created_at must lie in [2000-01-01"),
    ("vms", "vm_id", "   ", "vm_id"),
    ("vms", "customer_id", "", "customer_id"),
])
def test_impossible_values_are_refused(src, out, capsys, table, column, value, fragment):
    _set(table, column, value)(src)
    _refused(src, out, capsys, f"table '{table}'", fragment)


def test_booleans_are_not_numbers(src, out, capsys):
    vms = pd.read_parquet(src / "vms.parquet")
    vms["memory_gb"] = True
    vms.to_parquet(src / "vms.parquet")
    _refused(src, out, capsys, "table 'vms', column 'memory_gb'")


def test_epoch_integers_in_parquet_are_refused(src, out, capsys):
    vms = pd.read_parquet(src / "vms.parquet")
    vms["created_at"] = vms.created_at.astype("int64") // 10**9
    vms.to_parquet(src / "vms.parquet")
    _refused(src, out, capsys, "column 'created_at'", "timestamps are numbers", "unit='s'")


def test_an_unreadable_file(src, out, capsys, monkeypatch):
    """chmod cannot lock root out, so the read itself is made to fail as it does for other users."""
    real = pd.read_parquet

    def denied(path, *a, **kw):
        if str(path).endswith("vms.parquet") and str(src) in str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(pd, "read_parquet", denied)
    _refused(src, out, capsys, "table 'vms'", "the file is not readable", "read access")


def test_two_files_for_one_table_are_refused(src, out, capsys):
    """An export that moved from Parquet to CSV, last month's file left beside it: neither is picked."""
    pd.read_parquet(src / "vms.parquet").head(5).to_csv(src / "vms.csv", index=False)
    _refused(src, out, capsys, "table 'vms'", "2 files hold this table", "vms.parquet, vms.csv", "keep one")


def test_a_table_file_named_in_another_case_is_named(src, out, capsys):
    (src / "vm_counters.parquet").rename(src / "VM_Counters.parquet")
    _refused(src, out, capsys, "table 'vm_counters'", "has VM_Counters.parquet", "rename it to vm_counters.csv")


@pytest.mark.parametrize("table, wrong, column", [
    ("vms", " customer_id", "customer_id"),                  # a required column with a stray space
    ("vms", "Untouched_So_Far", "untouched_so_far"),         # an optional one: never dropped without a word
])
def test_a_column_named_in_another_case_is_named(src, out, capsys, table, wrong, column):
    df = pd.read_parquet(src / f"{table}.parquet")
    if column not in df:
        df[column] = 0.5
    df.rename(columns={column: wrong}).to_parquet(src / f"{table}.parquet")
    _refused(src, out, capsys, f"table '{table}', column '{column}'", repr(wrong), "rename")


def test_pmu_events_in_another_case_are_named(src, out, capsys, tmp_path):
    """Event columns are free names (any event counted in both tables), so case is a hint, not a rule:
    one table in lower case is a mismatch that says so; both in lower case cannot feed TMA."""
    lower = {"CPU_CLK_UNHALTED.THREAD": "cpu_clk_unhalted.thread", "UOPS_ISSUED.ANY": "uops_issued.any"}
    wl = pd.read_parquet(src / "workloads.parquet").rename(columns=lower)
    wl.to_parquet(src / "workloads.parquet")
    _refused(src, out, capsys, "table 'vm_counters'", "2 of them only in upper and lower case", "upper case")
    pd.read_parquet(src / "vm_counters.parquet").rename(columns=lower).to_parquet(src / "vm_counters.parquet")
    state, _ = check(src)
    for table in ("workloads", "vm_counters"):
        assert "'cpu_clk_unhalted.thread' for 'CPU_CLK_UNHALTED.THREAD'" in state[table], state[table]
        assert "2 of the PMU events spelled in another case" in state[table]


@pytest.mark.parametrize("cut", ["mid_field", "after_comma", "first_field"])
def test_a_csv_cut_mid_row_is_refused_as_cut_off(src, out, capsys, cut):
    """An interrupted export: the last row loses its end. It used to read as a shorter table, and the refusal
    blamed vm_counters ("counters for unknown VMs") for the row vms lost."""
    vms = _as_csv(src, "vms")
    text = vms.to_csv(index=False)
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    keep = {"mid_field": last.index(",2026-") + 8, "after_comma": last.index(",") + 1, "first_field": 5}[cut]
    (src / "vms.csv").write_text(text.rstrip("\n")[: len(text.rstrip("\n")) - len(last) + keep])
    err = _refused(src, out, capsys, "table 'vms'", "vms.csv is cut off", f"row {len(vms):,}")
    assert "vm_counters" not in err


def test_a_csv_without_its_last_line_end_is_read_whole(src, tmp_path):
    vms = _as_csv(src, "vms")
    (src / "vms.csv").write_text(vms.to_csv(index=False).rstrip("\n"))
    assert run_pond(["import", str(src), "--out", str(tmp_path / "whole")]) == 0
    assert len(read_tables(tmp_path / "whole", ["vms"])["vms"]) == len(vms)
